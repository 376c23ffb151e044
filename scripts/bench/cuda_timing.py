"""How every peer script here times a GPU call, as `crema bench` and ../shared/bench/peer_cudnn.py
do: warm-up calls, then the median of CUDA-event timings of one call each. Imported by the
peer_*.py scripts beside it (python3 puts a script's own folder on the import path)."""
import torch


def median_ms(fn, warmup=5, repeats=30):
    """The median time of fn() in milliseconds, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]
