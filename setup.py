"""The package's one C module, built when a C compiler is at hand (pyproject.toml has the rest).

`transcripts/formats/_linescan.c` reads Claude Code and OpenClaw lines for a streamed load
without building them. It is optional: without a compiler the install goes on, and the
loader reads every line with orjson as before (the same answers, more slowly).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "transcripts.formats._linescan",
            ["transcripts/formats/_linescan.c"],
            optional=True,
            extra_compile_args=["-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
