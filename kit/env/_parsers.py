"""Pure parsers for the text a host's tools print: ``nvidia-smi`` query CSV and ``topo -m`` (tab- or
space-aligned, ANSI underline, NIC rows and legend, ``GPU NUMA ID`` on newer drivers), NCCL and CUDA
versions, ``/proc/PID/environ``. They take text (live or saved) and never run anything."""
from __future__ import annotations

import csv
import html
import io
import re
from dataclasses import dataclass, field

import pandas as pd

from kit.errors import ParseError
from kit.util import strip_ansi

_NA = {"[Not Supported]", "[N/A]", "N/A", "[Unknown Error]", "[Insufficient Permissions]", ""}
_UNIT = re.compile(r"^(?P<name>.+?)\s*\[(?P<unit>[^\]]+)\]$")
_FIELD = re.compile(r"^[a-z][a-z0-9_.]*(?: \[[^\]]+\])?$")  # query field names, e.g. memory.total [MiB]
_NUM = re.compile(r"^-?\d+(?:\.\d+)?$")
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\S+|NODE\d+)$")
_LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
_LINK_ORDER = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SOC": 5, "SYS": 5}


def with_units(gpus: pd.DataFrame) -> pd.DataFrame:
    """A copy of a :func:`parse_gpu_query` table for display, each column with a unit named with it
    (``memory.total [MiB]``; nvidia-smi's own units where the query printed none)."""
    units = {**_NOUNITS, **gpus.attrs.get("units", {})}
    return gpus.rename(columns={c: f"{c} [{units[c]}]" for c in gpus.columns if c in units})


# nvidia-smi's units for the fields the kit queries, used where a query was made with ``nounits``
_NOUNITS = {"memory.total": "MiB", "memory.used": "MiB", "memory.free": "MiB", "power.limit": "W",
            "power.draw": "W", "clocks.max.sm": "MHz", "clocks.sm": "MHz", "temperature.gpu": "C"}


def parse_gpu_query(text: str, fields: list[str] | None = None, source: str = "<text>") -> pd.DataFrame:
    """``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` -> one row per GPU: columns are
    the query fields without units (their units, from the header or the values, in ``df.attrs["units"]``),
    numbers as numbers, ``[Not Supported]``/``[N/A]`` as None. Without a header, pass ``fields``."""
    lines = [ln for ln in strip_ansi(text).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise ParseError(f"{source}: no nvidia-smi query output", path=source)
    if "NVSMI LOG" in text or re.search(r"^\s*Attached GPUs\s*:", text, re.M):
        raise ParseError(f"{source}: this is `nvidia-smi -q` output; the GPU table is read from "
                         "`nvidia-smi --query-gpu=index,name,memory.total,compute_cap,driver_version --format=csv`",
                         path=source)
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))
    except csv.Error as exc:  # a field over csv's 128 KiB limit, a NUL byte: not nvidia-smi output
        raise ParseError(f"{source}: not nvidia-smi query output ({exc})", path=source) from None
    first = [c.strip() for c in rows[0]]
    header = [_UNIT.sub(r"\g<name>", c) for c in first]
    if all(_FIELD.match(c) for c in first) and (fields is None or header == fields):
        names, rows = header, rows[1:]
        units = {m.group("name"): m.group("unit") for c in first if (m := _UNIT.match(c))}
    elif fields is not None:
        names, units = list(fields), {}
    else:
        raise ParseError(f"{source}: nvidia-smi query output has no header; pass fields=[...]", path=source)
    records = []
    for i, row in enumerate(rows):
        cells = [c.strip() for c in row]
        if len(cells) != len(names):
            raise ParseError(f"{source}: row {i + 1} has {len(cells)} values for {len(names)} fields: {row!r}",
                             path=source)
        records.append({name: _gpu_value(name, cell, units) for name, cell in zip(names, cells)})
    df = pd.DataFrame(records, columns=names)
    df.attrs["units"] = units
    return df


def _gpu_value(name: str, cell: str, units: dict[str, str]):
    if cell in _NA:
        return None
    parts = cell.rsplit(" ", 1)
    if len(parts) == 2 and _NUM.match(parts[0]) and parts[1] in ("MiB", "GiB", "%", "W", "MHz", "C", "KiB"):
        units.setdefault(name, parts[1])
        cell = parts[0]
    if name in ("name", "driver_version", "pci.bus_id", "uuid", "serial", "vbios_version", "pci.device_id",
                "compute_cap"):
        return cell
    if _NUM.match(cell):
        return float(cell) if "." in cell else int(cell)
    return cell


@dataclass
class Topology:
    """The link matrix of ``nvidia-smi topo -m``: ``links`` (link tokens, ``X``, ``NV18``, ``PIX``, ``SYS``
    ..., by device on both axes, GPUs then NICs), ``affinity`` (per GPU: ``CPU Affinity``, ``NUMA Affinity``,
    ``GPU NUMA ID``); ``kind``: ``"NVLink"`` (every GPU pair), ``"PCIe-only"``, ``"mixed"`` or ``"single GPU"``;
    ``worst``: the slowest GPU-GPU link type."""

    links: pd.DataFrame
    affinity: pd.DataFrame
    nic_legend: dict[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> list[str]:
        return [d for d in self.links.index if d.startswith("GPU")]

    @property
    def nics(self) -> list[str]:
        return [d for d in self.links.columns if not d.startswith("GPU")]

    @property
    def nic_links(self) -> pd.DataFrame:
        """GPU rows x NIC columns (``PIX`` = the NIC sits on the GPU's PCIe switch); empty without NICs."""
        return self.links.loc[self.gpus, self.nics]

    @property
    def gpu_links(self) -> pd.DataFrame:
        return self.links.loc[self.gpus, self.gpus]

    def _pairs(self) -> list[str]:
        g = self.gpus
        return [p for a in g for b in g if a != b and (p := str(self.links.at[a, b])) not in ("X", "")]

    @property
    def worst(self) -> str | None:
        pairs = self._pairs()
        return max(pairs, key=link_rank) if pairs else None

    @property
    def kind(self) -> str:
        pairs = self._pairs()
        if not pairs:
            return "single GPU"
        nv = [p.startswith("NV") for p in pairs]
        return "NVLink" if all(nv) else ("PCIe-only" if not any(nv) else "mixed")

    @property
    def summary(self) -> str:
        """E.g. ``"8 GPUs, NVLink (worst link NV18)"`` or ``"8 GPUs, PCIe-only (worst link SYS)"``."""
        n = len(self.gpus)
        worst = self.worst
        tail = f" (worst link {worst})" if worst else ""
        nics = f", {len(self.nics)} NIC{'s' if len(self.nics) != 1 else ''}" if self.nics else ""
        return f"{n} GPU{'s' if n != 1 else ''}{nics}, {self.kind}{tail}"

    def to_dict(self) -> dict:
        return {"summary": self.summary, "kind": self.kind, "worst": self.worst,
                "devices": list(self.links.index), "links": self.links.values.tolist(),
                "affinity": self.affinity.reset_index().to_dict(orient="records"), "nic_legend": dict(self.nic_legend)}

    def __repr__(self) -> str:
        return f"Topology({self.summary})"

    def _repr_html_(self) -> str:
        def colour(v: str) -> str:  # NVLink green, then lighter to darker as the link gets slower
            links = {"X": "#eeeeee", "PIX": "#fff9c4", "PXB": "#ffe0b2", "PHB": "#ffccbc", "NODE": "#ffab91"}
            return "#c8e6c9" if v.startswith("NV") else links.get(v, "#ef9a9a")
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.links.columns)
        body = "".join(
            f"<tr><th>{html.escape(r)}</th>" + "".join(
                f"<td style='background:{colour(str(v))};text-align:center'>{html.escape(str(v))}</td>"
                for v in self.links.loc[r]) + "</tr>" for r in self.links.index)
        return (f"<div><b>{html.escape(self.summary)}</b></div>"
                f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>")


def link_rank(token: str) -> tuple[int, int]:
    """Sort key, larger = slower: NVLink (more links faster) < PIX < PXB < PHB < NODE < SYS."""
    if token.startswith("NV"):
        return (0, -int(token[2:] or 0))
    return (_LINK_ORDER.get(token, 6), 0)


def parse_topology(text: str, source: str = "<text>") -> Topology:
    """``nvidia-smi topo -m`` output (tab or space aligned, ANSI escapes, NIC rows) -> :class:`Topology`."""
    lines = strip_ansi(text).replace("\r", "").split("\n")
    # the header row is indented (tab or spaces) and starts with GPU0
    start = next((i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"] and line[:1].isspace()), None)
    if start is None:
        raise ParseError(f"{source}: no nvidia-smi topo -m header (a row starting with GPU0) found", path=source)
    header = lines[start]
    cols = [c.strip() for c in (header.split("\t") if "\t" in header else re.split(r"\s{2,}", header)) if c.strip()]
    devices = [c for c in cols if _DEVICE.match(c)]
    extra = [c for c in cols if not _DEVICE.match(c)]
    n = len(devices)
    rows: dict[str, list[str]] = {}
    aff: dict[str, list[str | None]] = {}
    for line in lines[start + 1:]:
        if not line.strip():
            if rows:
                break
            continue
        if line.strip().startswith("Legend"):
            break
        toks = line.split()
        label = toks[0]
        if label not in devices:
            raise ParseError(f"{source}: unexpected row {line.strip()!r} in the topo -m matrix", path=source)
        cells = toks[1:1 + n]
        if len(cells) < n or not all(_LINK.match(c) for c in cells):
            raise ParseError(f"{source}: row {label} has link cells {cells!r}, expected {n} link types", path=source)
        rows[label] = cells
        if label.startswith("GPU"):
            vals = toks[1 + n:]
            aff[label] = [(v if v not in ("N/A",) else None) for v in vals[: len(extra)]] + \
                [None] * (len(extra) - len(vals))
    legend = {m.group(1): m.group(2) for line in lines[start:] if (m := re.match(r"^\s+(NIC\d+):\s*(\S+)\s*$", line))}
    if "GPU0" not in rows:
        raise ParseError(f"{source}: topo -m header found but no GPU rows", path=source)
    order = [d for d in devices if d in rows]
    # rows present (NIC rows may be cut from a paste), every column: GPU-NIC links stay in the GPU rows
    links = pd.DataFrame([rows[d][: len(devices)] for d in order], index=order, columns=devices)
    affinity = pd.DataFrame.from_dict(aff, orient="index", columns=extra)
    affinity.index.name = "gpu"
    return Topology(links=links, affinity=affinity, nic_legend=legend)


_NCCL_VERSION = [
    re.compile(r"NCCL version\s+(\d+)\.(\d+)\.(\d+)"),
    re.compile(r"^\(?\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)?$"),
    re.compile(r"libnccl\.so\.(\d+)\.(\d+)\.(\d+)"),
    re.compile(r"^(\d+)\.(\d+)\.(\d+)"),
]


def parse_nccl_version(text: str | int | tuple | list) -> str | None:
    """``"2.21.5"`` from any of: a ``NCCL version 2.21.5+cuda12.4`` log line, ``torch.cuda.nccl.version()``
    (a tuple, or an int code like ``22105`` / ``2708``), a ``libnccl.so.2.21.5`` file name. None if absent."""
    if isinstance(text, (tuple, list)):
        return ".".join(str(int(x)) for x in text[:3]) if len(text) >= 3 else None
    if isinstance(text, int) or (isinstance(text, str) and text.strip().isdigit()):
        code = int(text)
        if code >= 10000:  # NCCL >= 2.9: major*10000 + minor*100 + patch
            return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        return f"{code // 1000}.{code // 100 % 10}.{code % 100}"
    for line in strip_ansi(str(text)).splitlines():
        for rx in _NCCL_VERSION:
            m = rx.search(line.strip())
            if m:
                return ".".join(m.groups())
    return None


def parse_nvidia_smi_header(text: str, source: str = "<text>") -> dict[str, str | None]:
    """Driver and CUDA versions from the ``nvidia-smi`` banner or ``nvidia-smi -q``; ParseError naming
    ``source`` when the text holds neither (never a silent None for both)."""
    text = strip_ansi(text)
    drv = re.search(r"Driver Version\s*:\s*([\d.]+)", text)
    cuda = re.search(r"CUDA Version\s*:\s*([\d.]+)", text)
    if not drv and not cuda:
        raise ParseError(f"{source}: no 'Driver Version' or 'CUDA Version' found: not the output of nvidia-smi "
                         "or nvidia-smi -q", path=source)
    return {"driver": drv.group(1) if drv else None, "cuda": cuda.group(1) if cuda else None}


def parse_nvcc_version(text: str) -> str | None:
    """``12.4`` from ``nvcc --version`` (``Cuda compilation tools, release 12.4, V12.4.131``)."""
    m = re.search(r"release\s+([\d.]+)", text)
    return m.group(1) if m else None


def parse_environ(data: bytes | str, prefix: str | tuple[str, ...] = "NCCL_") -> dict[str, str]:
    """The variables starting with ``prefix`` in a ``/proc/PID/environ`` dump (NUL- or newline-separated)."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    items = (item.partition("=") for item in data.split("\0" if "\0" in data else "\n"))
    return dict(sorted({key: value for key, eq, value in items if eq and key.startswith(prefix)}.items()))


def parse_os_release(text: str) -> str | None:
    """``PRETTY_NAME`` of ``/etc/os-release``."""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return m.group(1) if m else None


def parse_cpu_model(text: str) -> str | None:
    """CPU model from ``lscpu`` (``Model name:``) or ``/proc/cpuinfo`` (``model name :``)."""
    m = re.search(r"^(?:Model name|model name)\s*:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else None
