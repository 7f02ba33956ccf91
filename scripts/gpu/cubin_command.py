#!/usr/bin/env python3
"""Prints a CUDA source's compile command from the build tree's compile_commands.json, turned into
a cubin build for sm_90a with ptxas -v (no -c, -o or --generate-code; the caller adds -o FILE and
runs it in the build directory). Prints nothing where the file is not in the build. Shared by
sass_local.sh and ptxas_audit.sh.
  cubin_command.py SOURCE build/cuda/compile_commands.json"""
import json
import os
import sys

src = os.path.abspath(sys.argv[1])
for e in json.load(open(sys.argv[2])):
    if os.path.abspath(e["file"]) == src:
        out, skip = [], False
        for w in e["command"].split():
            if skip:
                skip = False
                continue
            if w in ("-c", "-o"):
                skip = w == "-o"
                continue
            if w.startswith("--generate-code"):
                continue
            out.append(w)
        print(" ".join(out[:-1] + ["-arch=sm_90a", "-cubin", "-Xptxas", "-v", out[-1]]))
        break
