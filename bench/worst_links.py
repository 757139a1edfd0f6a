"""The heaviest link each page accepts: every input at the value that costs the most. Shared by
bench/load.py (hostile neighbours) and bench/pages.py (--hostile: one rerun of each)."""

WORST_LINKS = {
    "engine": "e_scn=Custom+requests&e_text="
    + "%0A".join(["4096+4096+4096+0"] * 64)
    + "&e_step=2000&e_blocks=512&e_bs=32&e_cache=true",
    "cache_fill": "f_prompt=1&f_new=159&f_layers=16&f_mode=No+cache",
    "budget": "model=qwen3-next-80b-a3b&b_ctx=10000000&b_conc=1000000&b_block=1&b_util=1.0",
    "step_time": "model=deepseek-v3&s_ctx=10000000&s_batch=4096&s_xmax=1,048,576&s_batch_open=true",
    "lab": "model=jamba-v0.1&l_ctx=10000000&l_batch=4096&l_prompt=10000000",
    "techniques": "model=gemma-3-27b&t_ctx=10000000&t_gpu_tokens=1&t_window=1",
    "vllm_startup": "model=qwen3-next-80b-a3b&u_len=10000000&tp=4",
    "interview": "i_mode=practice&i_seed=999999",
    "": "model=deepseek-v3&tp=32&pp=8",
    "frontier": "fr_prompt=3000&fr_output=1200&fr_over=MHA%3A+one+K%2FV+head+per+query+head",
    "roofline": "model=deepseek-v3&r_prompt=1000000&r_batch=4096&r_ctx=1000000",
}
