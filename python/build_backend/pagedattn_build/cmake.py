"""Configures and builds the Python module with CMake in build-python/<interpreter>/ and stages
the `python` install component (the package with libpagedattn beside its module)."""
import os
import shlex
import shutil
import subprocess


def cuda_setting():
    """PAGEDATTN_CUDA (ON, OFF, AUTO) when set; else the kernels only when a GPU is visible, as
    scripts/demo.sh does (nothing here could run them, and they take most of the build's time)."""
    if os.environ.get("PAGEDATTN_CUDA"):
        return os.environ["PAGEDATTN_CUDA"]
    smi = shutil.which("nvidia-smi")
    listed = smi and subprocess.run([smi, "-L"], capture_output=True, text=True).stdout
    return "AUTO" if listed and "GPU" in listed else "OFF"


def configure_args(python):
    args = ["-DCMAKE_BUILD_TYPE=Release", "-DPAGEDATTN_PYTHON=ON", f"-DPython3_EXECUTABLE={python}",
            "-DPAGEDATTN_BUILD_TESTS=OFF", "-DPAGEDATTN_BUILD_TOOLS=OFF",
            f"-DPAGEDATTN_CUDA={cuda_setting()}"]
    for knob in ("PAGEDATTN_CUDA_ARCHS", "PAGEDATTN_HEAD_SIZES"):
        if os.environ.get(knob):
            args.append(f"-D{knob}={os.environ[knob]}")
    return args + shlex.split(os.environ.get("PAGEDATTN_CMAKE_ARGS", ""))


def build_dir(source_dir, python):
    """One build folder per interpreter, named after its path (the module is built for one ABI)."""
    name = os.path.realpath(python).strip("/").replace("/", "-")
    return os.path.join(source_dir, "build-python", name)


def run(*args):
    """CMake's output reaches the user with `pip install -v`, and on failure."""
    subprocess.run(args, check=True)


def build_and_stage(source_dir, python):
    """The staged tree: <build>/stage/pagedattn/{*.py, _C*.so, libpagedattn.so.N}."""
    build = build_dir(source_dir, python)
    stage = os.path.join(build, "stage")
    run("cmake", "-S", source_dir, "-B", build, *configure_args(python))
    run("cmake", "--build", build, "--target", "pagedattn_python", "-j", str(os.cpu_count() or 1))
    shutil.rmtree(stage, ignore_errors=True)
    run("cmake", "--install", build, "--component", "python", "--prefix", stage)
    return stage
