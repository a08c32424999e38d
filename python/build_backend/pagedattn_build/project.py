"""The distribution's metadata: pyproject.toml's [project] table, the version from CMakeLists.txt
(the one source; `pagedattn.__version__` is the same number) with the commit as a PEP 440 local
label, so that pip's "Found existing installation: pagedattn 0.1.0+g1a2b3c4" names the build it
replaces."""
import importlib.metadata
import re
import subprocess
import sys
import tomllib


def cmake_version(source_dir="."):
    with open(f"{source_dir}/CMakeLists.txt") as f:
        return re.search(r"project\(pagedattn\s+VERSION\s+([0-9.]+)", f.read()).group(1)


def local_label(source_dir="."):
    """'+g1a2b3c4' (and '.dirty' when the tree has changes), or '' outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", "--no-optional-locks", "-C", source_dir, *args],
                              capture_output=True, text=True)
    head = git("rev-parse", "--short=7", "HEAD")
    if head.returncode != 0:
        return ""
    dirty = ".dirty" if git("status", "--porcelain").stdout.strip() else ""
    return f"+g{head.stdout.strip()}{dirty}"


def metadata(source_dir="."):
    """[project] with 'version' filled in."""
    with open(f"{source_dir}/pyproject.toml", "rb") as f:
        meta = dict(tomllib.load(f)["project"])
    meta["version"] = cmake_version(source_dir) + local_label(source_dir)
    return meta


def check_dependencies(meta):
    """Stops the build, with one message, when this interpreter lacks a required package: the
    module would build but `import pagedattn` would fail."""
    missing = []
    for requirement in meta["dependencies"]:
        name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        print(f"pagedattn: {sys.executable} has no {', '.join(missing)}, which `import pagedattn` "
              "needs; install it for this interpreter first, or build with /usr/bin/python3, which "
              "has Debian's python3-numpy and python3-torch (README.md, Python)", file=sys.stderr)
        raise SystemExit(1)
