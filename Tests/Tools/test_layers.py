#!/usr/bin/env python3
"""Tests of scripts/layers.py (make layers runs them): the real tree passes, and a copy of it
with one upward use or one Glibc import planted fails, naming the file and what it uses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = os.path.normpath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(REPOSITORY, "scripts", "layers.py")
SOURCES = os.path.join(REPOSITORY, "Sources", "IngestKit")

sys.path.insert(0, os.path.dirname(SCRIPT))
import layers  # noqa: E402  (the script, for strip_code)


def run(root: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, SCRIPT] + ([root] if root else []), capture_output=True, text=True)


class LayersTest(unittest.TestCase):
    def setUp(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="layers-test-")
        self.root = os.path.join(self.directory, "Sources", "IngestKit")
        shutil.copytree(SOURCES, self.root)

    def tearDown(self) -> None:
        shutil.rmtree(self.directory)

    def plant(self, relative: str, text: str) -> None:
        with open(os.path.join(self.root, relative), "w", encoding="utf-8") as file:
            file.write(text)

    def test_the_tree_passes(self) -> None:
        result = run()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("no folder uses one above it", result.stdout)

    def test_a_copy_of_the_tree_passes(self) -> None:
        result = run(self.root)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_a_call_to_a_function_of_a_folder_above_fails_naming_it(self) -> None:
        self.plant("Pipeline/PlantedAbove.swift", "func plantedOnlyInPipeline() -> Int { 1 }\n")
        self.plant("Support/PlantedBelow.swift", "func belowUsesAbove() -> Int { plantedOnlyInPipeline() }\n")
        result = run(self.root)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn(
            "Sources/IngestKit/Support/PlantedBelow.swift: Support uses plantedOnlyInPipeline of Pipeline, which is above it",
            result.stderr)

    def test_an_extension_member_of_a_folder_above_used_below_fails(self) -> None:
        self.plant("Pipeline/PlantedAbove.swift", "extension String {\n    var plantedShout: String { uppercased() }\n}\n")
        self.plant("Values/PlantedBelow.swift", 'func belowShouts() -> String { "a".plantedShout }\n')
        result = run(self.root)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("Values uses plantedShout of Pipeline", result.stderr)

    def test_a_private_member_or_a_name_declared_below_as_well_is_no_use_of_the_folder_above(self) -> None:
        self.plant("Pipeline/PlantedAbove.swift",
                   "extension String {\n    fileprivate var plantedPrivate: String { self }\n"
                   "    var plantedTwice: String { self }\n}\n")
        self.plant("Support/PlantedBelow.swift",
                   "struct Planted {\n    var plantedTwice: String\n    var plantedPrivate: String\n"
                   "    func use() -> String { plantedTwice + self.plantedPrivate }\n}\n")
        result = run(self.root)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_code_after_a_url_in_a_string_is_still_read(self) -> None:
        self.plant("Pipeline/PlantedAbove.swift", "func plantedOnlyInPipeline() -> Int { 1 }\n")
        self.plant("Support/PlantedBelow.swift",
                   'func belowUsesAbove() -> Int { let _ = "http://example.com"; return plantedOnlyInPipeline() }\n')
        result = run(self.root)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("Support uses plantedOnlyInPipeline of Pipeline", result.stderr)

    def test_a_use_in_a_comment_or_a_string_is_none(self) -> None:
        self.plant("Pipeline/PlantedAbove.swift", "func plantedOnlyInPipeline() -> Int { 1 }\n")
        self.plant("Support/PlantedBelow.swift",
                   '/* plantedOnlyInPipeline() */\n// plantedOnlyInPipeline()\n'
                   'let plantedText = """\n  plantedOnlyInPipeline()\n  """\n')
        result = run(self.root)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_a_glibc_import_outside_the_system_layer_fails_naming_the_fix(self) -> None:
        self.plant("Values/PlantedGlibc.swift", "import Glibc\n\nfunc plantedPID() -> Int32 { getpid() }\n")
        result = run(self.root)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("Sources/IngestKit/Values/PlantedGlibc.swift: imports Glibc; call it through Support/System",
                      result.stderr)


class StripCodeTest(unittest.TestCase):
    def test_strings_go_before_comments_and_interpolations_stay_code(self) -> None:
        code = layers.strip_code('let a = "http://x" + f() // g()\nlet b = "\\(h("//")) y" /* i() */ + j()\n')
        self.assertIn("f()", code)
        self.assertNotIn("g()", code)
        self.assertIn("h(", code)
        self.assertNotIn("i()", code)
        self.assertIn("j()", code)
        self.assertNotIn("http", code)
        self.assertEqual(code.count("\n"), 2)

    def test_multi_line_and_raw_strings_are_emptied(self) -> None:
        code = layers.strip_code('let a = """\n  k() "quoted"\n  """ + l()\nlet b = #"m() "n()" \\(o())"# + p()\n')
        for gone in ("k()", "m()", "n()", "o()"):
            self.assertNotIn(gone, code)
        for kept in ("l()", "p()"):
            self.assertIn(kept, code)


if __name__ == "__main__":
    unittest.main()
