"""A local Ray for the Ray backend's tests: started once per test session (2 CPUs, no dashboard), stopped at the end.

Every test here runs on one pytest-xdist worker (``RAY_TESTS``: group "ray", ``--dist loadgroup`` in the Makefile), so the suite
never starts two Ray instances side by side on a 2-core machine. A test that needs a cluster of its own
(test_two_nodes.py) shuts this one down; the next test that asks for ``ray_backend`` starts it again.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ray", reason="the Ray backend's tests need requirements-ray.txt (make test installs it)")

import core.runtime.backend as backend  # noqa: E402

# each module here: pytestmark = RAY_TESTS; the first test on a worker starts a local Ray (tens of seconds on two
# cores) and deploys models, so these get 300 s against the default 120
RAY_TESTS = [pytest.mark.ray, pytest.mark.slow, pytest.mark.xdist_group("ray"), pytest.mark.timeout(300)]


class _Local:
    def __init__(self) -> None:
        self.rb = None

    def get(self):
        import ray

        from core.runtime.backend.ray_backend import RayBackend
        from core.runtime.backend.ray_settings import RaySettings

        if self.rb is None or not ray.is_initialized():
            # one thread per replica, as the scale-out benchmark (the parity tests compare with 1 thread here); four
            # models at a quarter CPU each leave a whole CPU for the jobs' actors
            self.rb = RayBackend(RaySettings(cpus=2, replicas=1, replica_cpus=0.25, replica_threads=1, max_models=4))
        return self.rb

    def stop(self) -> None:
        import ray

        if ray.is_initialized():
            from ray import serve

            try:
                serve.shutdown()
            finally:
                ray.shutdown()
        self.rb = None


_LOCAL = _Local()


@pytest.fixture(scope="session")
def _ray_session():
    yield _LOCAL
    _LOCAL.stop()


@pytest.fixture()
def ray_backend(_ray_session):
    """The local Ray backend, installed as this process's backend for one test (the in-process one comes back)."""
    rb = _ray_session.get()
    old = backend.use(rb)
    try:
        yield rb
    finally:
        backend.use(old)


@pytest.fixture()
def no_local_ray(_ray_session):
    """For a test that starts its own cluster: the session's local Ray is stopped first (restarted on demand)."""
    _ray_session.stop()
    old = backend.use(None)
    try:
        yield
    finally:
        backend.use(old)
