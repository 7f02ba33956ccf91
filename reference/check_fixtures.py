#!/usr/bin/env python3
"""Checks the committed tiny-model fixtures without torch: the float64 numpy forward pass
(np_reference.py) over each model's saved files must reproduce the recorded logits of both
prompts, the last intermediate (`norm`) and the greedy continuation.
    python3 reference/check_fixtures.py [tests/fixtures]      exit status 1 on a mismatch
"""
import json
import os
import sys

import numpy as np

from np_reference import np_forward

MODELS = ["qwen3_tiny", "llama_tiny", "qwen2_tiny"]
TOL = 1e-4  # max |logit difference| allowed (transformers fp32 vs numpy f64 was ~1e-5)


def read_f32(d, spec):
    return np.fromfile(os.path.join(d, spec["file"]), dtype="<f4").reshape(spec["shape"])


def check(d):
    ref = json.load(open(os.path.join(d, "reference.json")))
    errors = []
    for tag, p in ref["prompts"].items():
        err = float(np.abs(np_forward(d, p["ids"]) - read_f32(d, p["logits"])).max())
        if not err <= TOL:
            errors.append(f"prompt {tag}: max |logit diff| {err:.2e} > {TOL}")
    inter = ref["intermediates"]
    blob = np.fromfile(os.path.join(d, inter["file"]), dtype="<f4")
    names = [t["name"] for t in inter["tensors"]]
    if names[0] != "embed" or names[-1] != "norm" or sum(int(np.prod(t["shape"])) for t in inter["tensors"]) != blob.size:
        errors.append(f"intermediates index does not describe {inter['file']}")
    g = ref["greedy"]
    ids = g["prompt_ids"] + g["new_ids"]
    argmax = np_forward(d, ids)[len(g["prompt_ids"]) - 1:-1].argmax(-1).tolist()
    if argmax != g["new_ids"]:
        errors.append(f"greedy: numpy gives {argmax}, recorded {g['new_ids']}")
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
    bad = 0
    for m in MODELS:
        errors = check(os.path.join(root, m))
        print(f"{m}: {'ok' if not errors else '; '.join(errors)}")
        bad += bool(errors)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
