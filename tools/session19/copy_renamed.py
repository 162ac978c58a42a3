"""Copy each generated directory below SRC into DST as <name><SUFFIX>: the directory, its files' names and every
mention of the name inside them (kernel, entry point and harness symbols), so that two copies of one spec build,
verify and bench side by side.   python3 tools/session19/copy_renamed.py SRC DST SUFFIX"""
import pathlib
import shutil
import sys


def copy_renamed(src: pathlib.Path, dst: pathlib.Path, suffix: str) -> list[pathlib.Path]:
    made = []
    for d in sorted(p for p in src.iterdir() if p.is_dir()):
        old, new = d.name, d.name + suffix
        shutil.copytree(d, dst / new)
        for f in sorted((dst / new).iterdir()):
            if f.is_file():
                text = f.read_text().replace(old, new)
                f.unlink()
                (dst / new / f.name.replace(old, new)).write_text(text)
        made.append(dst / new)
        print("copied", old, "->", new)
    return made


def patch_copies(src: pathlib.Path, dst: pathlib.Path, args: list[str], patch, suffix) -> None:
    """For each NAME=VALUE of args: copy SRC/NAME to DST/<NAME><suffix(VALUE)> (copy_renamed) and rewrite its
    kernel source with patch(text, VALUE). The variant scripts of sessions 21 and 22 run through this. Each patch
    runs once on SRC/NAME's source before anything is copied: a patch that fails leaves no copy behind under the
    variant's name (session 24's call 2 built and verified such an unpatched copy as the variant)."""
    for arg in args:
        name, value = arg.split("=")
        patch((src / name / f"{name}.cu").read_text(), value)
        tmp = dst / ".one"
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / name).symlink_to((src / name).resolve())
        for d in copy_renamed(tmp, dst, suffix(value)):
            cu = d / f"{d.name}.cu"
            cu.write_text(patch(cu.read_text(), value))
        (tmp / name).unlink()
        tmp.rmdir()


if __name__ == "__main__":
    copy_renamed(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3])
