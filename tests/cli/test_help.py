"""``rollax --help`` loads no JAX (its CPU time: benchmarks/bench_cli.py): the package's names
load on first use, the sub-command modules import only the standard library, NumPy and
rollax's argument helpers, and the devices are configured after parsing. ``import rollax``
still enables float64, for JAX imported before or after it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _python(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["basin", "--help"],
        ["friction", "fit", "--help"],
        ["robot", "--help"],
        ["robot", "optimize", "--help"],
        ["penny", "--help"],
        ["penny", "chaos", "--help"],
    ],
)
def test_help_loads_no_jax(argv):
    out = _python(
        "import contextlib, io, sys\n"
        "from rollax.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as buf:\n"
        f"    code = main({argv!r})\n"
        "print(code, 'jax' in sys.modules, len(buf.getvalue()) > 200)"
    )
    assert out.split() == ["0", "False", "True"]


@pytest.mark.parametrize("first", ["jax", "rollax"])
def test_float64_whichever_is_imported_first(first):
    second = "rollax" if first == "jax" else "jax"
    out = _python(
        f"import {first}, {second}\nimport jax.numpy as jnp\n"
        "print(jnp.asarray(1.0).dtype, jax.config.jax_enable_x64)"
    )
    assert out.split() == ["float64", "True"]


def test_the_public_names_load_on_first_use():
    out = _python(
        "import sys, rollax\n"
        "before = 'jax' in sys.modules\n"
        "names = [getattr(rollax, n) for n in rollax.__all__]\n"
        "print(before, 'jax' in sys.modules, rollax.models.rim.__name__, len(names))"
    )
    before, after, rim, n = out.split()
    assert (before, after, rim) == ("False", "True", "rollax.models.rim") and int(n) >= 20
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        import rollax

        rollax.nonexistent  # noqa: B018


def test_the_cli_degree_limit_is_the_models():
    from rollax.cli.friction import MAX_DEGREE
    from rollax.models.friction.harmonic import MAX_DEGREE as MODEL

    assert MAX_DEGREE == MODEL


def test_all_lists_exactly_the_loaded_names():
    import rollax

    assert sorted(rollax.__all__) == sorted(rollax._EXPORTS)


def test_help_names_the_public_path():
    import pydoc

    import rollax

    assert "in module rollax\n" in pydoc.render_doc(rollax.solve) + "\n"
    assert (
        rollax.Solution.__module__ == "rollax"
        and repr(rollax.Solution) == "<class 'rollax.Solution'>"
    )


def test_a_system_without_state_names_is_refused_at_definition():
    import jax.numpy as jnp

    import rollax

    # refused where the class is defined (an abstract base may leave them to subclasses)
    with pytest.raises(TypeError, match="NoNames has no state_names: a system must name"):

        class NoNames(rollax.AbstractSystem):
            events = (rollax.crossing("zero"),)

            def vector_field(self, t, y, mode):
                return jnp.stack([y[1], -y[0]])

            def event_values(self, t, y, mode):
                return y[:1]

    class Base(rollax.AbstractSystem):  # abstract (no vector_field): allowed
        events = (rollax.crossing("zero"),)

    # names computed per instance (a property) are checked when the system is built
    class Computed(Base):
        @property
        def state_names(self):
            return ()

        def vector_field(self, t, y, mode):
            return y

    with pytest.raises(ValueError, match="Computed has no state_names: a system must name"):
        Computed()


def test_each_penny_mode_has_its_own_help():
    # `rollax penny chaos --help` lists chaos's options (and says how long it takes), run's
    # lists run's, the command's lists both
    from rollax.cli import main

    def help_of(argv):
        try:
            main(argv)
        except SystemExit:
            pass

    import contextlib
    import io

    for argv, has, lacks in [
        (["penny", "chaos", "--help"], ["--samples", "--seed", "2.5 minutes"], ["--impacts"]),
        (["penny", "run", "--help"], ["--impacts", "--table"], ["--samples", "--seed"]),
        (["penny", "--help"], ["--impacts", "--samples"], []),
    ]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            help_of(argv)
        text = out.getvalue()
        assert all(h in text for h in has) and not any(x in text for x in lacks), text


def test_the_cli_floquet_limits_are_the_analysis_ones():
    from rollax.analysis import floquet
    from rollax.cli import floquet as cli

    assert (cli.GRID_MAX, cli.POINTS_MAX) == (floquet.GRID_MAX, floquet.POINTS_MAX)
