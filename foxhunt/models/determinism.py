"""The one function that makes torch deterministic, called before any CUDA work (training, evaluation,
scoring). Every switch here is about the algorithms: a run is repeatable because every kernel it uses is
deterministic, never because one machine's choices were cached."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import torch

# cuBLAS needs a fixed workspace to be deterministic on CUDA 10.2 and later (the CUDA Toolkit
# documentation, cuBLAS, "Results reproducibility"; torch.use_deterministic_algorithms says the same)
CUBLAS_WORKSPACE = ":4096:8"


def make_deterministic(threads: int) -> dict[str, str]:
    """Set every switch and return them, for a manifest:
    - deterministic algorithms, raising on an op that has none (rather than warning);
    - cuDNN: deterministic, benchmark off (its autotuner picks by timing, which differs run to run);
    - TF32 off for matmul and cuDNN, and float32 matmul precision "highest";
    - a fixed number of CPU threads (a parallel reduction's order can follow their number)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    if os.environ["CUBLAS_WORKSPACE_CONFIG"] not in (":4096:8", ":16:8"):
        raise RuntimeError(
            f"CUBLAS_WORKSPACE_CONFIG is {os.environ['CUBLAS_WORKSPACE_CONFIG']!r}; deterministic cuBLAS needs"
            " ':4096:8' or ':16:8'"
        )
    torch.use_deterministic_algorithms(True, warn_only=False)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.set_num_threads(threads)
    return {
        "deterministic_algorithms": "on", "cudnn_benchmark": "off", "tf32": "off",
        "float32_matmul_precision": "highest", "threads": str(threads),
        "cublas_workspace_config": os.environ["CUBLAS_WORKSPACE_CONFIG"],
    }


def fingerprint(device: torch.device) -> dict[str, str]:
    """What a result depends on besides the code, data and seed: the environment, for manifests."""
    import platform

    import numpy

    out = {
        "torch": str(torch.__version__), "python": platform.python_version(), "numpy": numpy.__version__,
        "device": device.type, "machine": platform.machine(),
    }
    if device.type == "cpu":  # the instructions torch's kernels use, and the processor: results follow both
        out |= {"cpu_capability": str(torch.backends.cpu.get_cpu_capability()), "cpu": _processor()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        out |= {
            "cuda": str(torch.version.cuda), "cudnn": str(torch.backends.cudnn.version()),
            "gpu": props.name, "sm_count": str(props.multi_processor_count),
            "capability": f"{props.major}.{props.minor}",
            "triton": _version("triton"),  # the compiler of the fused kernels (adapters/inference/fused/)
        }
    return out


def _version(package: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def _processor() -> str:
    """The processor's model name (Linux /proc/cpuinfo), else what the platform says."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


Module = TypeVar("Module", bound=torch.nn.Module)


def seeded(seed: int, make: Callable[[], Module]) -> Module:
    """`make()`'s initial weights from `seed` alone, drawn on the CPU from a generator of their own (the
    global one is left as it was), so every device starts from the same bits."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()
