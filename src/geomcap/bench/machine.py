"""Machine facts (CPU, memory, versions, load), timing a call, and the matmul peak."""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from geomcap import store
from geomcap.models import bf16_matmul_native


def committed_results_dir() -> Path:
    """The committed benchmark results: data/bench (:func:`geomcap.store.committed_data`)."""
    return store.committed_data("bench")


def log_progress(progress: bool, message: str) -> None:
    """With ``progress``, ``message`` as one timed line on stderr ("[bench HH:MM:SS] ..."): a benchmark's log."""
    if progress:
        print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the machine --------------------------------------------------------------

def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def machine_info(device: torch.device) -> dict:
    """CPU model, cores, torch/transformers versions, device (and GPU name and memory on CUDA)."""
    try:
        import transformers
        transformers_version = transformers.__version__
    except ImportError:
        transformers_version = None
    info = {
        "cpu_model": store.cpu_model(),
        "cpu_cores": os.cpu_count(),
        "cpu_cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the vector kernels torch picked (AVX2, AVX512)
        "cpu_bf16_native": bf16_matmul_native(torch.device("cpu")),  # bf16 products on oneDNN, not a reference GEMM
        "torch_threads": torch.get_num_threads(),
        "memory_gib": memory_gib(),
        "torch_version": torch.__version__,
        "transformers_version": transformers_version,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "device": device.type,
        "git_commit": store.git_commit(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(gpu_name=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    cuda_version=torch.version.cuda)
    return info


def memory_gib() -> float | None:
    """The machine's memory in GiB (from /proc/meminfo; None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def default_output_name(device: torch.device) -> str:
    """File name for a result: ``cpu-2core.json``, ``cuda-nvidia-h200.json``."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device).lower()
        return "cuda-" + "".join(c if c.isalnum() else "-" for c in name).strip("-") + ".json"
    return f"cpu-{os.cpu_count()}core.json"


# --- timing -------------------------------------------------------------------

def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_once(fn, device: torch.device = torch.device("cpu")) -> float:
    """Wall seconds of one call of ``fn()`` (the device synchronised before and after)."""
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def time_repeats(fn, repeats: int = 5, warmup: int = 1, device: torch.device = torch.device("cpu")) -> list[float]:
    """Seconds of ``repeats`` timed calls of ``fn()`` after ``warmup`` untimed ones."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    for _ in range(warmup):
        fn()
    return [time_once(fn, device) for _ in range(repeats)]


def summarize(values) -> dict:
    """Median, min, max and count of a list of numbers (seconds, ratios, ...)."""
    values = [float(v) for v in values]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


# --- the matmul peak ----------------------------------------------------------

def peak_dtype(device: torch.device) -> torch.dtype:
    """The dtype training runs its matrix products in: float32 on CPU, bf16 on CUDA (autocast)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def matmul_peak(device: torch.device, n: int = 2048, repeats: int = 10, warmup: int = 2,
                dtype: torch.dtype | None = None) -> dict:
    """FLOP/s of an n x n matrix product (2 n^3 FLOPs), median of ``repeats`` after ``warmup``.

    Returns {"flops_per_s": median, "min", "max", "n", "dtype", "repeats", "times_s"}.
    """
    if n < 1:
        raise ValueError(f"peak_n must be positive, got {n}")
    dtype = dtype or peak_dtype(device)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    times = time_repeats(lambda: torch.mm(a, b), repeats=repeats, warmup=warmup, device=device)
    rates = [2 * n ** 3 / t for t in times]
    s = summarize(rates)
    return {"flops_per_s": s["median"], "min": s["min"], "max": s["max"], "n": n,
            "dtype": str(dtype).replace("torch.", ""), "repeats": repeats, "times_s": times}
