"""Two Ray nodes on this machine (ray.cluster_utils.Cluster): a job asking for a GPU is placed on the node that
declares one; killing that node mid-job ends the job with a clear message, and the app keeps serving predictions
and jobs on the node that is left."""

from __future__ import annotations

import functools
import time

import pytest

import core.runtime.backend as backend
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskConfig, fill_mask
from core.runtime.jobs import DONE, ERROR
from tests.ray_backend import jobs_fixture
from tests.ray_backend.conftest import RAY_TESTS

pytestmark = RAY_TESTS


@pytest.fixture()
def two_nodes(no_local_ray):
    import ray
    from ray import serve
    from ray.cluster_utils import Cluster

    from core.runtime.backend.ray_backend import RayBackend
    from core.runtime.backend.ray_settings import RaySettings

    # the head: two CPUs (a replica's quarter and a CPU job's one), no GPU; the worker: one CPU and one (declared)
    # GPU, which is what Ray schedules by
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    worker = cluster.add_node(num_cpus=1, num_gpus=1)
    cluster.wait_for_nodes()
    rb = RayBackend(RaySettings(address=cluster.address, replica_cpus=0.25, replica_threads=1, job_gpus=1))
    backend.use(rb)
    try:
        yield rb, cluster, worker
    finally:
        backend.use(None)
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
            cluster.shutdown()


@pytest.mark.timeout(600)
def test_jobs_go_where_their_resource_is_and_a_lost_node_ends_only_its_job(two_nodes, tiny_models):
    rb, cluster, worker = two_nodes
    r = rb.job_runner()
    gpu = r.submit("on the GPU node", functools.partial(jobs_fixture.ticking, 0.5), resource="gpu")
    r.wait(gpu, 180)
    assert gpu.status == DONE, gpu.error
    assert gpu.result["node"] == worker.node_id == gpu.placement["node"]

    # a long GPU job, then its node goes away under it
    doomed = r.submit("doomed", functools.partial(jobs_fixture.ticking, 300.0), resource="gpu")
    end = time.time() + 180
    while len(doomed.metrics) < 3:
        assert time.time() < end and not doomed.done, (doomed.status, doomed.error)
        time.sleep(0.1)
    assert doomed.placement["node"] == worker.node_id
    t0 = time.time()
    cluster.remove_node(worker)
    r.wait(doomed, 120)
    assert doomed.status == ERROR and "node running this job went away" in doomed.error, doomed.error
    lost_after = time.time() - t0

    # the app keeps serving: a prediction through the model tier, and a CPU job, on the head node
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="pretraining")
    res = fill_mask(lm, FillMaskConfig(f"the cat sat on the {lm.tokenizer.mask_token} ."))
    assert len(res.masks[0].candidates) == 5
    cpu = r.submit("after", functools.partial(jobs_fixture.ticking, 0.3), resource="cpu")
    r.wait(cpu, 120)
    assert cpu.status == DONE, cpu.error
    print(f"the lost node's job ended {lost_after:.1f} s after the node went")
