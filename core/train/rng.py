"""A seeded run's own random stream in a process that serves many people at once.

``torch.manual_seed`` (and accelerate's ``set_seed``) set the process-wide generators, which every thread shares:
two seeded fine-tunes in one server would draw each other's dropout masks and head initialisations, and neither
would reproduce. Where torch takes a generator argument we pass one (attribution's sampling, the data order, the
masks). Dropout inside transformers' modules and the initialisation of fresh layers cannot take one: they always
draw from the process generators. For those, ``RunRNG`` keeps the run's own CPU and CUDA generator states and
swaps them into the process generators only while it holds the lock, for the short sections that draw (a model
build, one training step), and swaps the previous states back afterwards.

The lock is ``core.models.loading.BUILD_LOCK``: every model build in EncoderLab holds it, and a build draws fresh weights
from the process generators, so a build must not run while a seeded run has its state swapped in (nor the other
way round). The cost is that seeded training steps of concurrent runs take turns; a model load waits for the
step in progress (a fraction of a second), and a step waits for a load in progress.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from core.models.loading import BUILD_LOCK


def _cuda_ready() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_initialized()


class RunRNG:
    """The torch random state of one seeded run (CPU, and every CUDA device once CUDA is in use).

    ``with rng.active():`` makes the process generators draw this run's stream; outside it they continue their
    own. Two runs with the same seed draw the same numbers however their sections interleave across threads.
    """

    def __init__(self, seed: int, cuda: bool | None = None):
        import torch

        self.seed = int(seed)
        self._cuda = _cuda_ready() if cuda is None else bool(cuda and torch.cuda.is_available())
        # The states torch.manual_seed(seed) would give the process generators, made without touching them.
        self.cpu_state = torch.Generator().manual_seed(self.seed).get_state()
        self.cuda_states = self._seeded_cuda_states() if self._cuda else []

    def _seeded_cuda_states(self) -> list:
        import torch

        return [
            torch.Generator(device=f"cuda:{i}").manual_seed(self.seed).get_state()
            for i in range(torch.cuda.device_count())
        ]

    @contextmanager
    def active(self) -> Iterator[None]:
        """Hold the lock and draw this run's stream; keeps where it got to; puts the previous state back."""
        import torch

        with BUILD_LOCK:
            cuda = self._cuda or _cuda_ready()
            if cuda and not self.cuda_states:  # CUDA came into use after this run started: seed its devices now
                self.cuda_states = self._seeded_cuda_states()
                self._cuda = True
            outer_cpu = torch.get_rng_state()
            outer_cuda = torch.cuda.get_rng_state_all() if cuda else []
            torch.set_rng_state(self.cpu_state)
            if cuda:
                torch.cuda.set_rng_state_all(self.cuda_states)
            try:
                yield
            finally:
                self.cpu_state = torch.get_rng_state()
                torch.set_rng_state(outer_cpu)
                if cuda:
                    self.cuda_states = torch.cuda.get_rng_state_all()
                    torch.cuda.set_rng_state_all(outer_cuda)

    def state_dict(self) -> dict:
        """For a checkpoint: the CPU state and one state per CUDA device (empty on a CPU-only run)."""
        return {"seed": self.seed, "cpu": self.cpu_state.clone(), "cuda": [s.clone() for s in self.cuda_states]}

    def load_state_dict(self, d: dict) -> None:
        """Continue from a checkpoint's states. CUDA states are kept for as many devices as this machine has;
        on a machine without CUDA they are skipped (the CPU stream still resumes exactly)."""
        import torch

        self.cpu_state = d["cpu"].clone()
        cuda = list(d.get("cuda") or [])
        if cuda and torch.cuda.is_available():
            n = torch.cuda.device_count()
            self.cuda_states = [s.clone() for s in cuda[:n]]
            self._cuda = True
