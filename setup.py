"""Maps the top-level folders to ``promptprism.*`` packages (README "Development"),
and builds the optional compiled OTLP walker.

``promptprism`` itself is a namespace: nothing is importable as a bare
``collector`` or ``exporter``.

``promptprism.collector.otlp._walk`` (Cython, from PyPI, + the system C
compiler) decodes OTLP trace protobuf several times faster than walking upb
messages in Python (README, "Ingest throughput"). It is optional: when
Cython or a compiler is missing, or the build fails, the package installs
without it and ``otlp.traces`` uses the pure-Python path, which gives the
same results. ``PROMPTPRISM_BUILD_EXTENSIONS=0`` skips it on purpose.
"""

import os
import sys

from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext

TOP_LEVEL = ("wire", "instrumentation", "exporter", "collector")
WALKER = "promptprism.collector.otlp._walk"
BLOCKS = "promptprism.collector.write._blocks"  # reassembly's per-block checks
STRINGS = "promptprism.collector.write._strings"  # string columns in one C pass
DOCUMENTS = "promptprism.collector.write._documents"  # request documents in one C pass
MEMORY = "promptprism.collector.write._memory"  # a worker keeps the memory a conversion freed

packages = []
package_dir = {}
for top in TOP_LEVEL:
    for found in find_packages(include=[top, f"{top}.*"]):
        name = f"promptprism.{found}"
        packages.append(name)
        package_dir[name] = found.replace(".", "/")


class OptionalBuildExt(build_ext):
    """A failed compile leaves the pure-Python fallback in place instead of failing the install."""

    def run(self):
        try:
            super().run()
        except Exception as error:  # noqa: BLE001 - any build failure means "no extension"
            print(f"promptprism: compiled OTLP walker not built ({error}); using the pure-Python path",
                  file=sys.stderr)

    def build_extension(self, extension):
        try:
            super().build_extension(extension)
        except Exception as error:  # noqa: BLE001
            print(f"promptprism: {extension.name} not built ({error}); using the pure-Python path", file=sys.stderr)


def extensions():
    if os.environ.get("PROMPTPRISM_BUILD_EXTENSIONS", "1") == "0":
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("promptprism: Cython not available; using the pure-Python OTLP walk", file=sys.stderr)
        return []
    from setuptools import Extension

    # Objects made and read at their slots' offsets (collector/_slotted.h, included by these three).
    slotted = {"include_dirs": ["collector"], "depends": ["collector/_slotted.h"]}
    compiled = [Extension(WALKER, ["collector/otlp/_walk.pyx"], extra_compile_args=["-O2"], **slotted),
                Extension(BLOCKS, ["collector/write/_blocks.pyx"], extra_compile_args=["-O2"], **slotted),
                Extension(STRINGS, ["collector/write/_strings.pyx"], extra_compile_args=["-O2"], **slotted),
                Extension(DOCUMENTS, ["collector/write/_documents.pyx"], extra_compile_args=["-O2"]),
                Extension(MEMORY, ["collector/write/_memory.pyx"], extra_compile_args=["-O2"])]
    try:
        return cythonize(compiled, compiler_directives={"language_level": "3"}, quiet=True)
    except Exception as error:  # noqa: BLE001 - a Cython error must not break the install
        print(f"promptprism: cannot cythonize the OTLP walker ({error}); using the pure-Python path", file=sys.stderr)
        return []


setup(packages=packages, package_dir=package_dir, ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
