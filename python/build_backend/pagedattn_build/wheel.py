"""Writes the .dist-info, the wheel (a zip of the staged package plus its .dist-info) and the
sdist (the files git tracks)."""
import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile


def tag():
    """'cp311-cp311-linux_x86_64': the module is built for this interpreter's ABI and platform."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{python}-{python}{sys.abiflags}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"


def metadata_text(meta):
    lines = ["Metadata-Version: 2.1", f"Name: {meta['name']}", f"Version: {meta['version']}",
             f"Summary: {meta['description']}", f"Requires-Python: {meta['requires-python']}"]
    lines += [f"Requires-Dist: {r}" for r in meta["dependencies"]]
    for extra, requirements in meta.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requirements]
    return "\n".join(lines) + "\n"


def dist_info_name(meta):
    return f"{meta['name']}-{meta['version']}.dist-info"


def dist_info_files(meta, files=None):
    """{archive path: bytes} of the .dist-info: METADATA, WHEEL, and RECORD over `files` too
    ({archive path: bytes}) when given."""
    name = dist_info_name(meta)
    entries = {f"{name}/METADATA": metadata_text(meta).encode(),
               f"{name}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: pagedattn_build\n"
                                 f"Root-Is-Purelib: false\nTag: {tag()}\n").encode()}
    if files is not None:
        rows = [f"{path},sha256={digest(data)},{len(data)}" for path, data in {**files, **entries}.items()]
        entries[f"{name}/RECORD"] = ("\n".join(rows + [f"{name}/RECORD,,"]) + "\n").encode()
    return entries


def write_dist_info(directory, meta):
    for path, data in dist_info_files(meta).items():
        os.makedirs(os.path.join(directory, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(directory, path), "wb") as f:
            f.write(data)
    return dist_info_name(meta)


def digest(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(wheel_directory, meta, staged):
    files = {}
    for root, _, names in os.walk(staged):
        for name in sorted(names):
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, staged)] = f.read()
    entries = dist_info_files(meta, files)
    wheel_name = f"{meta['name']}-{meta['version']}-{tag()}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w") as z:
        for path, data in {**files, **entries}.items():
            info = zipfile.ZipInfo(path)
            info.external_attr = (0o755 if path.endswith(".so") or ".so." in path else 0o644) << 16
            z.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    return wheel_name


def write_sdist(sdist_directory, meta, source_dir):
    base = f"{meta['name']}-{meta['version']}"
    tracked = subprocess.run(["git", "-C", source_dir, "ls-files", "-z"], check=True,
                             capture_output=True, text=True).stdout.split("\0")
    with tarfile.open(os.path.join(sdist_directory, base + ".tar.gz"), "w:gz") as tar:
        for path in filter(None, tracked):
            tar.add(os.path.join(source_dir, path), arcname=f"{base}/{path}", recursive=False)
        pkg_info = os.path.join(sdist_directory, "PKG-INFO")
        with open(pkg_info, "w") as f:
            f.write(metadata_text(meta))
        tar.add(pkg_info, arcname=f"{base}/PKG-INFO")
        os.remove(pkg_info)
    return base + ".tar.gz"
