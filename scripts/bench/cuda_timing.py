"""How every peer script here times a GPU call, as `crema bench` does (apps/bench.cpp, measure_ms
and burst_for): warm-up calls, then the median of CUDA-event timings of samples, each of one call
-- or, for a call shorter than 0.2 ms, of a burst of ceil(0.2 ms / one call) back-to-back calls
(at most 200), divided by its count -- and each queued behind a hold of the stream
(torch.cuda._sleep), so that the calls run at the GPU's pace and no sample holds the host's
launch gap (a few microseconds that vary call to call, which back-to-back kernels in a network do
not pay). Imported by the peer_*.py scripts beside it (python3 puts a script's own folder on the
import path)."""
import math

import torch

BURST_SPAN_MS = 0.2
MAX_BURST = 200


def burst_for(single_ms):
    """How many back-to-back calls one timed sample of a call of `single_ms` holds."""
    return int(min(MAX_BURST, max(1, math.ceil(BURST_SPAN_MS / max(single_ms, 1e-4)))))


# A Python call (autograd's backward, a fused optimizer step) can take 100 us of host time.
HOLD_US, HOLD_PER_CALL_US = 50, 200


def _median(fn, repeats, burst):
    times = []
    for _ in range(repeats):
        # queued behind a hold, as apps/bench.cpp does (gpu::hold); cycles at <= 2 GHz
        torch.cuda._sleep(int((HOLD_US + HOLD_PER_CALL_US * burst) * 2000))
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(burst):
            fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) / burst)
    times.sort()
    return times[len(times) // 2]


def median_ms(fn, warmup=5, repeats=30):
    """The median time of fn() in milliseconds, after `warmup` untimed calls (bursts of calls for
    a short one: burst_for on the median of three single calls)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    burst = burst_for(_median(fn, 3, 1))
    return _median(fn, repeats, burst)
