"""pagedattn.__version__ is CMakeLists.txt's project version and pagedattn.build_info() describes
the build that was imported: its commit (one of this repository's), CUDA and what was compiled,
the checkout it came from and where it was imported from."""
import os
import re
import subprocess
import unittest

import pagedattn as pa

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))


class BuildInfo(unittest.TestCase):
    def setUp(self):
        self.info = pa.build_info()

    def test_version_is_the_cmake_project_version(self):
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            cmake = re.search(r"project\(pagedattn\s+VERSION\s+([0-9.]+)", f.read()).group(1)
        self.assertEqual(pa.__version__, cmake)
        self.assertEqual(self.info["version"], cmake)

    def test_keys(self):
        self.assertEqual(set(self.info), {"version", "commit", "dirty", "cuda", "cuda_archs", "head_sizes",
                                          "build_type", "python", "source_dir", "package_dir"})
        self.assertIsInstance(self.info["dirty"], bool)
        self.assertTrue(self.info["build_type"])
        self.assertRegex(self.info["python"], r"^3\.\d+\.\d+")

    def test_commit_is_one_of_this_repository(self):
        commit = self.info["commit"]
        inside_git = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode == 0
        if not inside_git:
            self.assertEqual(commit, "unknown")
            return
        self.assertRegex(commit, r"^[0-9a-f]{40}$")
        found = subprocess.run(["git", "-C", ROOT, "cat-file", "-e", commit + "^{commit}"], capture_output=True)
        self.assertEqual(found.returncode, 0, f"{commit} is not a commit of {ROOT}")

    def test_cuda_and_what_was_compiled(self):
        self.assertEqual(self.info["cuda"], pa.built_with_cuda())
        if self.info["cuda"]:
            self.assertTrue(self.info["cuda_archs"])
            self.assertIn(128, self.info["head_sizes"])
        else:
            self.assertEqual((self.info["cuda_archs"], self.info["head_sizes"]), ([], []))
        self.assertTrue(all(isinstance(h, int) for h in self.info["head_sizes"]))

    def test_where_it_came_from(self):
        self.assertEqual(os.path.realpath(self.info["source_dir"]), ROOT)
        self.assertEqual(self.info["package_dir"], os.path.dirname(os.path.abspath(pa.__file__)))


if __name__ == "__main__":
    unittest.main()
