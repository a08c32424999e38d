"""The README's Python example (the first python block of its "## Python" section) runs as
written and its hand check agrees with the library."""
import contextlib
import io
import os
import re
import unittest

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def example():
    with open(README) as f:
        text = f.read()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


class ReadmeExample(unittest.TestCase):
    def test_runs(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("torch not importable")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(example(), "README.md", "exec"), {})
        print(printed.getvalue())
        error = float(re.search(r"max \|out - ref\| = (\S+)", printed.getvalue()).group(1))
        self.assertLess(error, 0.05)
        self.assertIn("<BackendSelection", printed.getvalue())


if __name__ == "__main__":
    unittest.main()
