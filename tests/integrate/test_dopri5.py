"""rollax._integrate.dopri5 (the kernel's DOPRI5) against the diffrax solver that rollax.solve uses for
``solver="dopri5"`` (rollax._integrate._solve._Dopri5): the same step, error estimate and continuous
extension, so that both integrators take the same steps and sample the same values; and
against diffrax.Dopri5, which differs in its error estimate (2/3 of Hairer's)."""

import diffrax
import jax.numpy as jnp
import numpy as np

from rollax._integrate import dopri5
from rollax._integrate._solve import _Contd5, _Dopri5


def f(t, y):
    return jnp.stack([y[1], -jnp.sin(y[0]) + 0.1 * t])


def _diffrax_step(solver, t0, h, y0):
    term = diffrax.ODETerm(lambda t, y, a: f(t, y))
    return solver.step(term, t0, t0 + h, y0, None, solver.init(term, t0, t0 + h, y0, None), False)


def test_solve_dopri5_is_the_kernels():
    t0, h = 0.2, 0.3
    y0 = jnp.array([1.0, 0.3])
    y1, err, ks, _, _ = dopri5.step(f, t0, y0, h, f(t0, y0))
    y1d, errd, dense, _, _ = _diffrax_step(_Dopri5(), t0, h, y0)
    np.testing.assert_allclose(y1d, y1, rtol=0, atol=1e-15)
    np.testing.assert_allclose(errd, err, rtol=0, atol=1e-16)
    ip = _Dopri5.interpolation_cls(t0=t0, t1=t0 + h, **dense)
    assert isinstance(ip, _Contd5)
    for theta in (0.0, 0.25, 0.5, 0.75, 1.0):
        want = dopri5.interpolate(y0, y1, ks, h, theta)
        np.testing.assert_allclose(ip.at_theta(theta), want, rtol=0, atol=1e-15)
        np.testing.assert_allclose(ip.evaluate(t0 + theta * h), want, rtol=0, atol=1e-15)
    np.testing.assert_allclose(ip.evaluate(t0, t0 + h), y1 - y0, rtol=0, atol=1e-15)


def test_diffrax_dopri5_estimates_two_thirds_of_the_error():
    # why rollax.solve does not use diffrax.Dopri5 as it is: the same solution, another
    # embedded one (so other steps)
    t0, h = 0.2, 0.3
    y0 = jnp.array([1.0, 0.3])
    y1, err, _, _, _ = dopri5.step(f, t0, y0, h, f(t0, y0))
    y1d, errd, _, _, _ = _diffrax_step(diffrax.Dopri5(), t0, h, y0)
    np.testing.assert_allclose(y1d, y1, rtol=0, atol=1e-15)
    np.testing.assert_allclose(errd, 2 / 3 * err, rtol=1e-9)
