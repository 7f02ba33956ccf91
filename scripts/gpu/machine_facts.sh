#!/usr/bin/env bash
# Prints what the GPU machine has (run there; output goes into scripts/gpu/README.md).
echo "== nvidia-smi";      nvidia-smi 2>&1 | head -20
echo "== os-release";      cat /etc/os-release 2>&1 | head -4
echo "== uname";           uname -a
echo "== cpus / memory";   nproc; free -g 2>&1 | head -2
echo "== glibc";           ldd --version 2>&1 | head -1
echo "== g++";             g++ --version 2>&1 | head -1
echo "== nvcc";            (command -v nvcc || ls /usr/local/cuda/bin/nvcc) 2>&1; nvcc --version 2>&1 | tail -2 || /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2
echo "== cmake";           cmake --version 2>&1 | head -1; command -v cmake ninja make 2>&1
echo "== dpkg";            command -v dpkg-deb ar pkg-config 2>&1
echo "== python";          command -v python3; python3 -c "import sys, torch, transformers, numpy, safetensors; print(sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" 2>&1 | tail -2
echo "== system libs";     ldconfig -p 2>/dev/null | grep -E "libssl.so.3|libz.so.1|libbrotli|libfmt|libgtest|libxxhash" | head
