"""PEP 517 build backend for pagedattn (pyproject.toml): the wheel is what CMake's `python`
install component stages (cmake/python.cmake), built for the interpreter that runs the backend.
Nothing is downloaded: it needs CMake, a compiler and pybind11-dev, as the scripts do."""
import os
import sys

from . import cmake, project, wheel

__all__ = ["get_requires_for_build_wheel", "prepare_metadata_for_build_wheel", "build_wheel",
           "build_sdist"]


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    meta = project.metadata()
    project.check_dependencies(meta)
    return wheel.write_dist_info(metadata_directory, meta)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    meta = project.metadata()
    project.check_dependencies(meta)
    staged = cmake.build_and_stage(os.getcwd(), sys.executable)
    return wheel.write_wheel(wheel_directory, meta, staged)


def build_sdist(sdist_directory, config_settings=None):
    return wheel.write_sdist(sdist_directory, project.metadata(), os.getcwd())
