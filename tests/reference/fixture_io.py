"""What the fixture scripts share: running the built tools, writing logits as the tests read
them, and the VERSIONS record of the packages a fixture was made with."""
import platform
import subprocess

import numpy as np
import safetensors
import torch
from safetensors.torch import save_file


def run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def save_logits(path, x):
    save_file({"logits": torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))}, path,
              metadata={"format": "pt"})


def versions():
    import transformers
    return {"python": platform.python_version(), "torch": torch.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__,
            "transformers": transformers.__version__}


def write_versions(path, *lines):
    """VERSIONS: one "package version" line each, sorted, then the given lines (the largest
    differences measured)."""
    v = versions()
    with open(path, "w") as f:
        f.write("".join("%s %s\n" % (k, v[k]) for k in sorted(v)))
        f.write("".join(line + "\n" for line in lines))
