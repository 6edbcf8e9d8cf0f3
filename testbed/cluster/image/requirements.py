"""Write requirements-operator.txt and requirements-runtime.txt: each image's pins, read from
pyproject.toml (its dependencies plus the image's extra), so that the pins are written once.

Usage: python3 requirements.py PYPROJECT OUTPUT_DIR
"""

import sys
import tomllib
from pathlib import Path

IMAGES = ("operator", "runtime")


def requirements(project: dict, image: str) -> list[str]:
    return sorted(set(project["dependencies"]) | set(project["optional-dependencies"][image]))


if __name__ == "__main__":
    pyproject, out = Path(sys.argv[1]), Path(sys.argv[2])
    project = tomllib.loads(pyproject.read_text())["project"]
    for image in IMAGES:
        (out / f"requirements-{image}.txt").write_text("\n".join(requirements(project, image)) + "\n")
