import sys, time
t0 = time.perf_counter()
import anyio
from harness.engines.vllm import open_default_engine
t1 = time.perf_counter()
import vllm.v1.engine.async_llm
t2 = time.perf_counter()
async def main():
    started = time.perf_counter()
    kw = {}
    for a in sys.argv[1:]:
        k, v = a.split("=")
        kw[k] = type_ = (float(v) if "." in v else (int(v) if v.isdigit() else v))
    async with open_default_engine(**kw):
        ready = time.perf_counter()
        print(f"import harness {t1 - t0:.1f} import vllm {t2 - t1:.1f} start {ready - started:.1f} total {ready - t0:.1f}", flush=True)
if __name__ == "__main__":
    anyio.run(main)
