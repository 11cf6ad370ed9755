# EncoderLab for a hosted GPU demo. Build:  docker build -t encoderlab .   (add --build-arg FETCH_WEIGHTS=0 to skip
# downloading the official checkpoints). Run:  docker run --gpus all -p 8501:8501 encoderlab
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

ARG FETCH_WEIGHTS=1
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    HF_HOME=/opt/hf \
    ENCODERLAB_ALLOW_DOWNLOAD=0 \
    TOKENIZERS_PARALLELISM=false

# The libraries headless Chrome needs: kaleido draws the session report's figures as PNG with it.
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-pip curl \
    libnss3 libatk-bridge2.0-0t64 libcups2t64 libxcomposite1 libxdamage1 libxrandr2 libgbm1 libxkbcommon0 \
    libpango-1.0-0 libasound2t64 fonts-noto-cjk \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 app && mkdir -p /opt/hf /app && chown -R app:app /opt/hf /app
WORKDIR /app

# The CUDA build of the same torch version as requirements.txt, then the pinned rest.
COPY --chown=app:app requirements.txt .
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir --upgrade pip \
    && /opt/venv/bin/pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128 \
    && /opt/venv/bin/pip install --no-cache-dir -r requirements.txt
ENV PATH=/opt/venv/bin:$PATH
# A headless Chrome for kaleido (session-report PNGs), fetched at build time like the weights below.
RUN kaleido_get_chrome

COPY --chown=app:app . .
USER app

# Official checkpoints' weights into the image's HF cache (safetensors only), so the demo never waits on the Hub.
RUN if [ "$FETCH_WEIGHTS" = "1" ]; then python -m core.fetch_weights; fi

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD curl -fsS http://localhost:8501/_stcore/health || exit 1
CMD ["streamlit", "run", "app/main.py", "--server.port=8501", "--server.address=0.0.0.0"]
