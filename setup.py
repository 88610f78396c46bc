"""Maps the top-level folders to ``promptprism.*`` packages (README "Development").

``promptprism`` itself is a namespace: nothing is importable as a bare
``collector`` or ``exporter``.
"""

from setuptools import find_packages, setup

TOP_LEVEL = ("wire", "instrumentation", "exporter", "collector")

packages = []
package_dir = {}
for top in TOP_LEVEL:
    for found in find_packages(include=[top, f"{top}.*"]):
        name = f"promptprism.{found}"
        packages.append(name)
        package_dir[name] = found.replace(".", "/")

setup(packages=packages, package_dir=package_dir)
