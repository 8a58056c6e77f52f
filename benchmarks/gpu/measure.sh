#!/usr/bin/env bash
# GPU measurements in one device call (rollax installed without deps over the image's CUDA jax).
# Each step has its own time limit so that the whole call ends inside the device's 10 minutes;
# logs and JSON go to $OUT. Usage: bash benchmarks/gpu/measure.sh [fused|fused2|fused3|fused4|fused5|fused6|fused7|fused8|fused9|fused10|fused11|fused12|fused13|fused14|fused15|fused16|fused17|fused18|shot1|shot2|issue62|sizes|compile|big|bench|tests]
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false ROLLAX_CACHE_DIR=off
OUT=${OUT:-/tmp/rollax-gpu}; mkdir -p "$OUT"
what=${1:-bench}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
python3 -c "import jax, diffrax, equinox, optax, optimistix, jaxtyping, rollax; print('jax', jax.__version__, 'diffrax', diffrax.__version__, 'equinox', equinox.__version__, 'optax', optax.__version__, 'optimistix', optimistix.__version__, 'jaxtyping', jaxtyping.__version__, jax.devices())"
step() { local limit=$1; shift; echo "== $* (limit ${limit}s)"; local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee -a "$OUT/$what.log" | grep -v "^WARNING\|^W0000\|^I0000" | tail -n 12
  echo "   ($((SECONDS - t0)) s)"; }
if [ "$what" = fused ]; then
  # the fused kernel (one GPU thread per start): conformance with the queue on this GPU, then
  # the 1000 x 1000 no-slip panel and the 360 x 240 panels without and with slipping (mu = 1)
  step 100 python3 benchmarks/gpu/conformance_fused.py --n 256 --cases rim_rolling,oscillator,bouncing_ball
  step 90 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 10 --repeat 3 --json "$OUT/basin_1000_fused.json"
  step 240 python3 benchmarks/bench_slip.py --backend fused --chunk 86400 --repeat 1 --json "$OUT/slip_fused.json"
elif [ "$what" = fused2 ]; then
  # the second call of 2026-11-26: the slipping panel with the time to spare, then one tuning
  # pass (64 starts and 2 warps per program)
  step 270 python3 benchmarks/bench_slip.py --backend fused --chunk 86400 --repeat 1 --json "$OUT/slip_fused.json"
  step 90 env ROLLAX_FUSED_BLOCK=64 ROLLAX_FUSED_WARPS=2 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 4 --repeat 2 --json "$OUT/basin_1000_b64.json"
elif [ "$what" = fused3 ]; then
  # 2026-11-26, stop 34: the fused path as four kernels per system (setup, serve, run, finish)
  # with rolled stages and samples. The compiles are CPU work (16 cores): the slipping panel
  # and the slipping conformance run in the background while the GPU does the no-slip panels.
  bg() { local limit=$1 log=$2; shift 2; ( t0=$SECONDS; timeout "$limit" "$@" >"$OUT/$log" 2>&1;
    echo "   (rc $?, $((SECONDS - t0)) s)" >>"$OUT/$log" ) & }
  bg 450 slip.log python3 benchmarks/bench_slip.py --backend fused --chunk 86400 --repeat 2 --json "$OUT/slip_fused.json"
  bg 430 conformance_slip.log python3 benchmarks/gpu/conformance_fused.py --n 256 --cases rim_slipping,sliding
  step 120 python3 benchmarks/gpu/conformance_fused.py --n 256 --cases rim_rolling,oscillator,bouncing_ball
  step 120 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 10 --repeat 3 --json "$OUT/basin_1000_fused.json"
  wait
  for f in conformance_slip.log slip.log; do echo "== $f"; grep -v "^WARNING\|^W0000\|^I0000" "$OUT/$f" | tail -n 8; done
elif [ "$what" = fused4 ]; then
  # the second call of stop 34: each kernel's compile time alone (background, CPU), the
  # 1000 x 1000 no-slip panel with nothing else on the GPU, then the slipping panel (its
  # reset map's sin/cos now rollax._core.fastmath's polynomials instead of libdevice calls)
  ( timeout 320 python3 benchmarks/gpu/compile_fused.py --phases --cases rim_slipping,rim_rolling --limit 300 >"$OUT/phases.log" 2>&1 ) &
  step 60 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 4 --repeat 3 --json "$OUT/basin_1000_fused.json"
  step 270 python3 benchmarks/bench_slip.py --backend fused --chunk 86400 --repeat 2 --json "$OUT/slip_fused.json"
  wait
  echo "== phases"; grep "^{" "$OUT/phases.log"
elif [ "$what" = fused5 ]; then
  # prepared in stop 34 for the next GPU: one tile per kernel (the compile fix), so first the
  # slipping panel, then the 1000 x 1000 no-slip panel with the stages unrolled (the default
  # without a reset map) and rolled, then the conformance of every system on the GPU
  step 200 python3 benchmarks/bench_slip.py --backend fused --chunk 86400 --repeat 2 --json "$OUT/slip_fused.json"
  step 60 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 4 --repeat 3 --json "$OUT/basin_1000_fused.json"
  step 60 env ROLLAX_FUSED_ROLLED=1 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 4 --repeat 3 --json "$OUT/basin_1000_rolled.json"
  step 180 python3 benchmarks/gpu/conformance_fused.py --n 256 --cases rim_slipping,sliding,rim_rolling,oscillator,bouncing_ball,penny,robot
elif [ "$what" = fused6 ]; then
  # stop 35 (one call, 900 s of device time): fused5 with the CPU-bound work in parallel on the
  # 16 cores: the conformance of all 7 systems and each slipping kernel's compile time alone run
  # in the background (their GPU work is 256 starts, milliseconds) while the slipping panel
  # compiles and runs; then the 1000 x 1000 no-slip panel, stages unrolled and rolled
  bg() { local limit=$1 log=$2; shift 2; ( t0=$SECONDS; timeout "$limit" "$@" >"$OUT/$log" 2>&1;
    echo "   (rc $?, $((SECONDS - t0)) s)" >>"$OUT/$log" ) & }
  bg 330 conformance.log python3 benchmarks/gpu/conformance_fused.py --n 256 --cases rim_slipping,sliding,rim_rolling,oscillator,bouncing_ball,penny,robot
  bg 300 phases.log python3 benchmarks/gpu/compile_fused.py --phases --cases rim_slipping,rim_rolling --limit 280
  step 240 python3 benchmarks/bench_slip.py --backend fused --chunk 86400 --repeat 2 --json "$OUT/slip_fused.json"
  step 60 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 4 --repeat 3 --json "$OUT/basin_1000_fused.json"
  step 60 env ROLLAX_FUSED_ROLLED=1 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 4 --repeat 3 --json "$OUT/basin_1000_rolled.json"
  wait
  echo "== phases"; grep "^{" "$OUT/phases.log"
  echo "== conformance"; grep -v "^WARNING\|^W0000\|^I0000" "$OUT/conformance.log" | tail -n 20
elif [ "$what" = fused7 ]; then
  # stop 35, second call: the tuning pass (starts per program and warps) on both panels
  for bw in "64 2" "128 4" "256 8"; do set -- $bw
    step 60 env ROLLAX_FUSED_BLOCK=$1 ROLLAX_FUSED_WARPS=$2 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 4 --repeat 3 --json "$OUT/basin_1000_b$1.json"
  done
  for bw in "64 2" "128 4"; do set -- $bw
    step 90 env ROLLAX_FUSED_BLOCK=$1 ROLLAX_FUSED_WARPS=$2 python3 benchmarks/bench_slip.py --backend fused --chunk 86400 --repeat 2 --json "$OUT/slip_b$1.json"
  done
elif [ "$what" = fused8 ]; then
  # stop 35, third call: where the time goes (device kernels by name against the wall time,
  # jax.profiler), the no-slip 1000 x 1000 and the mu = 1 360 x 240 panels; the penny's
  # conformance (its scan rule fixed for jax 0.11) in the background
  bg() { local limit=$1 log=$2; shift 2; ( t0=$SECONDS; timeout "$limit" "$@" >"$OUT/$log" 2>&1;
    echo "   (rc $?, $((SECONDS - t0)) s)" >>"$OUT/$log" ) & }
  bg 150 conformance.log python3 benchmarks/gpu/conformance_fused.py --n 256 --cases penny
  step 80 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/profile_noslip.json"
  step 80 python3 benchmarks/gpu/profile_fused.py --grid 360 240 --mu 1 --json "$OUT/profile_mu1.json"
  wait
  echo "== conformance"; grep -v "^WARNING\|^W0000\|^I0000" "$OUT/conformance.log" | tail -n 5
elif [ "$what" = fused9 ]; then
  # stop 35, fourth call: after the host-side cuts (no device round trip in check_state, no
  # copies of a single chunk's results): the profile, the 1000 x 1000 panel, the two panels
  step 60 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/profile_noslip.json"
  step 50 python3 benchmarks/bench_basin.py --backend fused --panels none --grid 1000 1000 --sample 4 --repeat 3 --json "$OUT/basin_1000_fused.json"
  step 70 python3 benchmarks/bench_slip.py --backend fused --chunk 86400 --repeat 2 --json "$OUT/slip_fused.json"
elif [ "$what" = fused10 ]; then
  # prepared in stop 35 for the next GPU: every system's conformance with event logs kept
  # (save_events rides in aux), then the two profiles (is the host's share smaller now that
  # Solution.y is contiguous?)
  step 240 python3 benchmarks/gpu/conformance_fused.py --n 256 --save-events 6 --cases rim_slipping,sliding,rim_rolling,oscillator,bouncing_ball,penny,robot
  step 60 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/profile_noslip.json"
  step 80 python3 benchmarks/gpu/profile_fused.py --grid 360 240 --mu 1 --json "$OUT/profile_mu1.json"
elif [ "$what" = fused11 ]; then
  # stop 36: the sweep keeps the fused path's results on the device through the classification
  # and fetches only what it keeps (a basin map: the outcome and its summary); a default
  # initial mode and an empty aux cost no pass over the starts. Before (.base/src: stop 35's
  # code, carried) and after, alternating on the same machine; then the slipping panel and the
  # hybrid systems' conformance with event logs (save_events rides in aux)
  for k in 1 2; do
    step 80 env PYTHONPATH=.base/src python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_base$k.json"
    step 80 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_new$k.json"
  done
  step 100 python3 benchmarks/gpu/profile_fused.py --grid 360 240 --mu 1 --json "$OUT/mu1_new.json"
  step 150 python3 benchmarks/gpu/conformance_fused.py --n 256 --save-events 6 --cases rim_slipping,penny,robot,rim_rolling
  rm -f "$OUT/pip.log"
elif [ "$what" = fused12 ]; then
  # the second call of stop 36: after the host's copies of the padding, the dummy leaf and the
  # finiteness check were cut; before/after alternating again, then the conformance of the
  # systems the first call's time limit left out
  for k in 1 2; do
    step 60 env PYTHONPATH=.base/src python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_base$k.json"
    step 60 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_new$k.json"
  done
  step 170 python3 benchmarks/gpu/conformance_fused.py --n 256 --save-events 6 --cases robot,rim_rolling,sliding,oscillator,bouncing_ball
  rm -f "$OUT/pip.log"
elif [ "$what" = fused13 ]; then
  # the third call of stop 36 (under 5 minutes of device time left): the grid's starts built
  # without index arrays; one before/after pair
  step 45 env PYTHONPATH=.base/src python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_base.json"
  step 45 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_new.json"
  rm -f "$OUT/pip.log"
elif [ "$what" = fused14 ]; then
  # prepared in stop 36 for the next GPU: the conformance that stop 36's limits cut off (the
  # robot compiles both paths for over 150 s: it runs in the background on the CPU cores while
  # the others run), then the 1000 x 1000 profile of the code as it is (stop 36: 0.086 s)
  ( timeout 330 python3 benchmarks/gpu/conformance_fused.py --n 256 --save-events 6 --cases robot >"$OUT/conformance_robot.log" 2>&1; echo "   (rc $?)" >>"$OUT/conformance_robot.log" ) &
  step 200 python3 benchmarks/gpu/conformance_fused.py --n 256 --save-events 6 --cases rim_rolling,sliding,oscillator,bouncing_ball
  step 60 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/profile_noslip.json"
  wait
  grep -v "^WARNING\|^W0000\|^I0000" "$OUT/conformance_robot.log" | tail -n 4
  rm -f "$OUT/pip.log"
elif [ "$what" = fused15 ]; then
  # stop 38 (one call): the sweep's grid built on the device (nothing of the panel's size
  # through NumPy or the bus) against the code before it (.base: stop 37's, with the event
  # rejection of events.unresolved) and stop 36's (.base36: before that rejection, so its
  # kernel cost shows), alternating; the mu = 1 panel; the conformance stop 36 cut off (the
  # robot in the background from the start: its compile is CPU work)
  ( timeout 400 python3 benchmarks/gpu/conformance_fused.py --n 256 --save-events 6 --cases robot >"$OUT/conformance_robot.log" 2>&1; echo "   (rc $?)" >>"$OUT/conformance_robot.log" ) &
  for k in 1 2; do
    step 45 env PYTHONPATH=.base36/src python3 .base36/benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_base36_$k.json"
    step 45 env PYTHONPATH=.base/src python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_base_$k.json"
    step 45 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_new_$k.json"
  done
  step 60 python3 benchmarks/gpu/profile_fused.py --grid 360 240 --mu 1 --json "$OUT/mu1_new.json"
  step 150 python3 benchmarks/gpu/conformance_fused.py --n 256 --save-events 6 --cases rim_rolling,sliding,oscillator,bouncing_ball
  wait
  grep -v "^WARNING\|^W0000\|^I0000" "$OUT/conformance_robot.log" | tail -n 4
  rm -f "$OUT/pip.log"
elif [ "$what" = fused16 ]; then
  # stop 38, second call: the starts' modes made on the device too, and the JAX dispatches of
  # the host's share named by the rollax frames around them (profile_fused.py's "callers")
  for k in 1 2; do
    step 45 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/noslip_new_$k.json"
  done
  rm -f "$OUT/pip.log"
elif [ "$what" = fused17 ]; then
  # stop 38, last call: the on-device sweep's results (one chunk against four; the mu = 1
  # panel's known counts), then two systems' conformance with the shared inputs put once
  step 120 python3 benchmarks/gpu/check_sweep.py
  step 90 python3 benchmarks/gpu/conformance_fused.py --n 256 --cases rim_rolling,bouncing_ball
  rm -f "$OUT/pip.log"
elif [ "$what" = fused18 ]; then
  # prepared in stop 38 for the next GPU: the work queue with its new GPU default (one lane
  # per start, lanes=None) on the 360 x 240 panel (2026-11-24: 0.169 s that way, 6.51 s with
  # 16,384 lanes); the 1000 x 1000 profile of the code as it is (stop 38: 0.039-0.050 s); then
  # the integrator, ensemble and sweep tests on the GPU (ts, dense output, the device grid)
  step 90 python3 benchmarks/bench_basin.py --backend queue --panels none --sample 4 --repeat 3 --json "$OUT/basin_queue.json"
  step 60 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/profile_noslip.json"
  step 300 env XLA_PYTHON_CLIENT_PREALLOCATE=false python3 -m pytest -q -x -p no:cacheprovider tests/integrate/test_solve.py tests/integrate/test_ensemble.py tests/drivers/test_sweep.py tests/integrate/test_fused.py
  rm -f "$OUT/pip.log"
elif [ "$what" = shot1 ]; then
  # stop 43 (one call): issue 40's free-throw map on the GPU, the queue (one lane per release)
  # then the fused kernel, each against the CPU's reference map (runs/stop43/shot_ref*.npz);
  # meanwhile, on the machine's quiet CPU cores (JAX_PLATFORMS=cpu), issue 36's gradient
  # benchmark (each case in its own process) and bench_optimize, the code before issue 36's work
  ( JAX_PLATFORMS=cpu timeout 470 python3 benchmarks/bench_gradients.py --repeat 20 --out "$OUT/grad" >"$OUT/grad.log" 2>&1; echo "   (rc $?)" >>"$OUT/grad.log" ) &
  ( JAX_PLATFORMS=cpu timeout 470 python3 benchmarks/bench_optimize.py --starts 2 >"$OUT/opt.log" 2>&1; echo "   (rc $?)" >>"$OUT/opt.log" ) &
  step 150 python3 benchmarks/gpu/shot_gpu.py --backend queue --ref benchmarks/gpu/runs/stop43/shot_ref.npz --json "$OUT/shot_queue.json"
  step 240 python3 benchmarks/gpu/shot_gpu.py --backend fused --ref benchmarks/gpu/runs/stop43/shot_ref.npz --json "$OUT/shot_fused.json"
  step 80 python3 benchmarks/gpu/shot_gpu.py --backend queue --spin 3 --ref benchmarks/gpu/runs/stop43/shot_ref_spin3.npz --json "$OUT/shot_spin3.json"
  wait
  grep -v "^WARNING\|^W0000\|^I0000" "$OUT/grad.log" | tail -n 16
  grep -v "^WARNING\|^W0000\|^I0000" "$OUT/opt.log" | tail -n 12
  rm -f "$OUT/pip.log"
elif [ "$what" = shot2 ]; then
  # stop 43, second call: shot1's fused kernel failed to trace (jax 0.11's unstack rule, fixed)
  # and the queue did not finish the 360 x 240 map in 150 s. Now: the fused map against the
  # CPU's reference; then the queue's compile alone, on a 36 x 24 map
  step 250 python3 benchmarks/gpu/shot_gpu.py --backend fused --ref benchmarks/gpu/runs/stop43/shot_ref.npz --json "$OUT/shot_fused.json"
  step 130 python3 benchmarks/gpu/shot_gpu.py --backend queue --grid 36 24 --repeat 2 --json "$OUT/shot_queue_small.json"
  rm -f "$OUT/pip.log"
elif [ "$what" = issue62 ]; then
  # prepared in stop 72 for issue 62, one call of about 8 minutes (NOTES.md, "issue62"):
  # (1) the host path: the 1000 x 1000 no-slip map and a direct solve_ensemble on its starts,
  #     the code after and before (.base, carried) alternating, each warm (best of 5); then
  #     the code after once more under cProfile (--profile);
  # (2) the device's view of the map (profile_fused.py: kernels against the wall time);
  # (3) the shot: first call (the four kernels' compile) and warm 360 x 240 map against the
  #     CPU's reference (runs/stop72/shot_ref.npz, made with this physics), after and before;
  # (4) conformance of every system on the GPU, in the background from the start (it shares
  #     the GPU with (1)-(3): their times are the device's while it runs, so (1) goes first
  #     and (4) waits 20 s for the first compile of (1) to start)
  ( sleep 20; timeout 420 python3 benchmarks/gpu/conformance_fused.py --n 256 >"$OUT/conformance.log" 2>&1; echo "   (rc $?)" >>"$OUT/conformance.log" ) &
  step 100 python3 benchmarks/gpu/host_path.py --grid 1000 1000 --repeat 5 --json "$OUT/host_after.json"
  if [ -d .base/src ]; then
    step 100 env PYTHONPATH=.base/src python3 benchmarks/gpu/host_path.py --grid 1000 1000 --repeat 5 --json "$OUT/host_before.json"
  fi
  step 80 python3 benchmarks/gpu/host_path.py --grid 1000 1000 --repeat 3 --profile --json "$OUT/host_profile.json"
  step 70 python3 benchmarks/gpu/profile_fused.py --grid 1000 1000 --json "$OUT/profile_noslip.json"
  step 200 python3 benchmarks/gpu/shot_gpu.py --backend fused --repeat 3 --ref benchmarks/gpu/runs/stop72/shot_ref.npz --json "$OUT/shot_fused.json"
  if [ -d .base/src ]; then  # the shot's kernels before stop 72's pruning (CPU Triton: 748 -> 485 s)
    step 150 env PYTHONPATH=.base/src python3 benchmarks/gpu/shot_gpu.py --backend fused --repeat 1 --ref benchmarks/gpu/runs/stop72/shot_ref.npz --json "$OUT/shot_fused_before.json"
  fi
  wait
  cat "$OUT/conformance.log"
  rm -f "$OUT/pip.log"
elif [ "$what" = sizes ]; then
  # prepared in stop 44: the fused path's chunks padded to at least 4096 rows on a GPU, so the
  # ball's kernels compile once for N = 300, 1000 and 4096 (and again for 5000: 8192 rows);
  # then lowering without the abstract-device question (rollax.fused_program) on this image
  step 300 python3 benchmarks/gpu/sizes_gpu.py
  step 120 python3 -m pytest -q -p no:cacheprovider tests/integrate/test_fused.py -k "lowers or phase or chunk_rows"
  rm -f "$OUT/pip.log"
elif [ "$what" = compile ]; then
  # the fused kernel's compile time against its size (Triton IR bytes; the CPU measures the
  # sizes: benchmarks/gpu/compile_fused.py --lower-only), 90 s per system at most
  step 480 python3 benchmarks/gpu/compile_fused.py --limit 90 --cases oscillator,bouncing_ball,rim_rolling,sliding,rim_slipping
elif [ "$what" = big ]; then
  # one lane per start (no refill): the 1000 x 1000 no-slip panel and the mu = 1 panel
  step 170 python3 benchmarks/bench_basin.py --panels none --grid 1000 1000 --lanes 1000000 --sample 10 --repeat 3 --json "$OUT/basin_1000.json"
  step 230 python3 benchmarks/bench_slip.py --lanes 86400 --chunk 86400 --repeat 2 --json "$OUT/slip.json"
elif [ "$what" = bench ]; then
  step 150 python3 benchmarks/bench_basin.py --panels none --lanes 2048 16384 86400 --sample 40 --repeat 3 --json "$OUT/basin_fig11.json"
  step 120 python3 benchmarks/bench_basin.py --panels none --grid 1000 1000 --lanes 65536 262144 --sample 20 --repeat 3 --json "$OUT/basin_1000.json"
  step 150 python3 benchmarks/bench_slip.py --lanes 16384 --repeat 2 --json "$OUT/slip.json"
  step 90 python3 benchmarks/bench_basin.py --panels drilling rolling --lanes 16384 --sample 20 --repeat 3 --json "$OUT/basin_diss.json"
  step 60 python3 benchmarks/bench_solve.py --calls 300 --starts 10000 --repeat 3
else
  # the whole suite with the image's jax on the CPU (16 workers), then the integrator tests on the GPU
  JAX_PLATFORMS=cpu step 300 python3 -m pytest -n 14 -p no:benchmark -p no:cacheprovider -q --timeout 280 -rf
  step 230 python3 -m pytest -n 4 -p no:benchmark -p no:cacheprovider -q --timeout 200 -rf \
    tests/integrate/test_solve.py tests/integrate/test_queue.py tests/integrate/test_ensemble.py \
    tests/core/test_events.py tests/test_conformance.py tests/test_placement.py \
    tests/analysis/test_basin.py
fi
