import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

const COLORS = ["#2f6f5e", "#3b6fb6", "#b7791f", "#9b2c6f"];

export interface Series {
  label: string;
  values: number[];
}

/** Bars over time, drawn by uPlot: `xs` in seconds since the epoch, one bar series per entry of `series`. */
export function TimeChart({ xs, series, label }: { xs: number[]; series: Series[]; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = box.current!;
    const plot = new uPlot(
      {
        width: element.clientWidth || 800,
        height: 160,
        legend: { show: series.length > 1 },
        scales: { x: { time: true } },
        axes: [{}, { size: 40 }],
        series: [
          {},
          ...series.map((s, i) => ({
            label: s.label,
            stroke: COLORS[i % COLORS.length],
            fill: `${COLORS[i % COLORS.length]}40`,
            paths: uPlot.paths.bars!({ size: [0.8, 24] }),
            points: { show: false },
          })),
        ],
      },
      [xs, ...series.map((s) => s.values)],
      element,
    );
    return () => plot.destroy();
  }, [xs, series]);
  return <div className="chart" ref={box} aria-label={label} role="img" />;
}

/** Events per minute over a time range. `times` are milliseconds since the epoch. */
export function RequestsChart({ times, start, end }: { times: number[]; start: number; end: number }) {
  const minute = 60_000;
  const first = Math.floor(start / minute);
  const buckets = Math.max(1, Math.ceil(end / minute) - first);
  const xs = Array.from({ length: buckets }, (_, i) => ((first + i) * minute) / 1000);
  const counts = new Array<number>(buckets).fill(0);
  for (const t of times) {
    const i = Math.floor(t / minute) - first;
    if (i >= 0 && i < buckets) counts[i]++;
  }
  return <TimeChart xs={xs} series={[{ label: "Requests", values: counts }]} label="Requests over time" />;
}
