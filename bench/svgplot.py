"""Line charts as plain SVG, with no plotting library (none is packaged where the benchmarks
run): panels of series laid out on a grid, each with a title, y-axis ticks in its unit, x-axis
ticks and a legend. Used by scripts/dashboard-picture and bench/contention.py.

    page = Page(width, height, title)
    page.panel(x, y, w, h, "title", [("name", [(x, y), ...]), ...], unit="bytes",
               xlabel=lambda v: "%ds" % v)
    page.bars(x, y, w, h, "title", [("row", [("part", 25.0), ...]), ...])  # stacked, of 100
    page.save("out.svg")
"""
from xml.sax.saxutils import escape

COLORS = ["#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9", "#705da0",
          "#508642", "#cca300"]


def fmt(v, unit):
    """v in unit as a tick label: percentunit (a ratio shown in %), bytes, hertz, watt, s, ms,
    or anything else as a short number."""
    if unit == "percentunit":
        return "%.0f%%" % (v * 100)
    if unit == "percent":
        return "%.0f%%" % v
    if unit == "s":
        return "%.2f ms" % (v * 1000) if v < 1 else "%.1f s" % v
    if unit == "ms":
        return "%.2f ms" % v
    scales = {"bytes": (1024, ["B", "KiB", "MiB", "GiB", "TiB"]),
              "hertz": (1000, ["Hz", "kHz", "MHz", "GHz"]), "watt": (1000, ["W", "kW"])}
    if unit in scales:
        step, names = scales[unit]
        i = 0
        while abs(v) >= step and i < len(names) - 1:
            v /= step
            i += 1
        return ("%.0f %s" if v == int(v) else "%.1f %s") % (v, names[i])
    return "%.3g" % v


class Page:
    def __init__(self, width, height, title):
        self.w, self.h = width, height
        self.out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
                    'font-family="sans-serif" font-size="11">' % (width, height),
                    '<rect width="100%" height="100%" fill="#161719"/>',
                    '<text x="10" y="24" fill="#d8d9da" font-size="15">%s</text>' % escape(title)]

    def panel(self, x0, y0, w, h, title, series, unit="short", xlabel=str, xticks=None,
              ymin=None, ymax=None, xmin=None, xmax=None):
        """One chart at (x0, y0) of w by h pixels. series: [(name, [(x, y), ...])];
        xticks: the x values to label (default 5 even steps)."""
        o = self.out
        o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="#212124" stroke="#333"/>'
                 % (x0, y0, w, h))
        o.append('<text x="%d" y="%d" fill="#d8d9da" font-size="13">%s</text>'
                 % (x0 + 8, y0 + 18, escape(title)))
        px0, py0, pw = x0 + 66, y0 + 30, w - 78
        ph = h - 30 - 18 - 16 * ((len(series) + 1) // 2)
        xs = [p[0] for _, pts in series for p in pts]
        ys = [p[1] for _, pts in series for p in pts]
        lo = ymin if ymin is not None else (min(0.0, min(ys)) if ys else 0.0)
        hi = ymax if ymax is not None else ((max(ys) * 1.05) if ys else 1.0)
        if unit == "percentunit" and ymax is None:
            hi = max(hi, 1.05)
        if hi <= lo:
            hi = lo + 1
        x_lo = xmin if xmin is not None else (min(xs) if xs else 0.0)
        x_hi = xmax if xmax is not None else (max(xs) if xs else 1.0)
        if x_hi <= x_lo:
            x_hi = x_lo + 1
        X = lambda v: px0 + pw * (min(max(v, x_lo), x_hi) - x_lo) / (x_hi - x_lo)  # noqa: E731
        Y = lambda v: py0 + ph - ph * (min(max(v, lo), hi) - lo) / (hi - lo)  # noqa: E731
        for k in range(5):
            v = lo + (hi - lo) * k / 4
            o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#2f2f32"/>'
                     % (px0, Y(v), px0 + pw, Y(v)))
            o.append('<text x="%d" y="%.1f" fill="#8e8e8e" text-anchor="end">%s</text>'
                     % (px0 - 4, Y(v) + 4, escape(fmt(v, unit))))
        for v in (xticks if xticks is not None else
                  [x_lo + (x_hi - x_lo) * k / 4 for k in range(5)]):
            o.append('<text x="%.1f" y="%d" fill="#8e8e8e" text-anchor="middle">%s</text>'
                     % (X(v), py0 + ph + 13, escape(xlabel(v))))
        if not series:
            o.append('<text x="%d" y="%d" fill="#e24d42">no data</text>'
                     % (px0 + pw / 2, py0 + ph / 2))
        for i, (name, pts) in enumerate(series):
            c = COLORS[i % len(COLORS)]
            path = " ".join("%.1f,%.1f" % (X(a), Y(b)) for a, b in pts)
            o.append('<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>'
                     % (c, path))
            lx, ly = x0 + 12 + (i % 2) * (w // 2), py0 + ph + 30 + 16 * (i // 2)
            o.append('<rect x="%d" y="%d" width="10" height="3" fill="%s"/>' % (lx, ly - 5, c))
            o.append('<text x="%d" y="%d" fill="#c7d0d9">%s</text>' % (lx + 14, ly, escape(name)))

    def bars(self, x0, y0, w, h, title, rows, total=100.0):
        """Stacked horizontal bars at (x0, y0) of w by h pixels, one per row, each part's
        width its value out of total, labelled with the value; rows: [(name, [(part, value)])].
        A grid line every quarter of total."""
        o = self.out
        o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="#212124" stroke="#333"/>'
                 % (x0, y0, w, h))
        o.append('<text x="%d" y="%d" fill="#d8d9da" font-size="13">%s</text>'
                 % (x0 + 8, y0 + 18, escape(title)))
        px0, py0, pw = x0 + 150, y0 + 30, w - 170
        ph = h - 30 - 20
        X = lambda v: px0 + pw * min(max(v, 0.0), total) / total  # noqa: E731
        for k in range(5):
            v = total * k / 4
            o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#2f2f32"/>'
                     % (X(v), py0, X(v), py0 + ph))
            o.append('<text x="%.1f" y="%d" fill="#8e8e8e" text-anchor="middle">%.0f%%</text>'
                     % (X(v), py0 + ph + 14, 100 * v / total))
        if not rows:
            o.append('<text x="%d" y="%d" fill="#e24d42">no data</text>'
                     % (px0 + pw / 2, py0 + ph / 2))
            return
        step = ph / len(rows)
        for i, (name, parts) in enumerate(rows):
            y = py0 + step * i + step * 0.2
            bh = step * 0.6
            o.append('<text x="%d" y="%.1f" fill="#c7d0d9" text-anchor="end">%s</text>'
                     % (px0 - 8, y + bh / 2 + 4, escape(name)))
            at = 0.0
            for j, (part, v) in enumerate(parts):
                if v is None or v <= 0:
                    continue
                c = COLORS[j % len(COLORS)]
                o.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" '
                         'stroke="#161719"/>' % (X(at), y, X(at + v) - X(at), bh, c))
                o.append('<text x="%.1f" y="%.1f" fill="#161719" text-anchor="middle">%s</text>'
                         % ((X(at) + X(at + v)) / 2, y + bh / 2 + 4,
                            escape("%s %.1f%%" % (part, v))))
                at += v

    def save(self, path):
        with open(path, "w") as f:
            f.write("\n".join(self.out + ["</svg>"]) + "\n")
