"""How engines allocate the cache: vLLM's own arithmetic version by version, the memory budget
by convention (vLLM, TensorRT-LLM, ideal), and a paged block pool with its scheduler.
"""
