"""Regenerate the committed NMX-C stubs from ``protos/nmx_c.proto``.

Run from a source checkout with the test extra installed (it needs ``grpcio-tools``)::

    python -m nico.fabric.nmxc.generate            # rewrite nico/fabric/nmxc/nmx_c_pb2*.py(i)
    python -m nico.fabric.nmxc.generate --out DIR  # write them into DIR instead

The proto is mapped to the virtual path ``nico/fabric/nmxc/nmx_c.proto`` so that protoc emits
package-absolute imports (``from nico.fabric.nmxc import nmx_c_pb2``); the proto package stays
``nmx_c``, so method paths on the wire are ``/nmx_c.NMX_Controller/<Rpc>``. A test runs this same
function into a temporary directory and compares the output with the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROTO = PACKAGE_DIR.parents[2] / "protos" / "nmx_c.proto"
VIRTUAL_DIR = "nico/fabric/nmxc"
OUTPUTS = ("nmx_c_pb2.py", "nmx_c_pb2.pyi", "nmx_c_pb2_grpc.py")


def generate(out_dir: Path, proto: Path = PROTO) -> list[Path]:
    """Compile ``proto`` into ``out_dir``; return the files written."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory(prefix="nmxc-gen-") as tmp:
        status = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{VIRTUAL_DIR}={proto.parent}",
                f"--python_out={tmp}",
                f"--pyi_out={tmp}",
                f"--grpc_python_out={tmp}",
                str(proto),
            ]
        )
        if status != 0:
            raise RuntimeError(f"protoc failed with status {status} on {proto}")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for name in OUTPUTS:
            target = out_dir / name
            shutil.copyfile(Path(tmp) / VIRTUAL_DIR / name, target)
            written.append(target)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PACKAGE_DIR, help="directory to write the stubs into")
    args = parser.parse_args()
    for path in generate(args.out):
        print(path)


if __name__ == "__main__":
    main()
