import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

/** Events per minute over a time range, drawn by uPlot. `times` are milliseconds since the epoch. */
export function RequestsChart({ times, start, end }: { times: number[]; start: number; end: number }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const minute = 60_000;
    const first = Math.floor(start / minute);
    const buckets = Math.max(1, Math.ceil(end / minute) - first);
    const xs = Array.from({ length: buckets }, (_, i) => ((first + i) * minute) / 1000);
    const counts = new Array<number>(buckets).fill(0);
    for (const t of times) {
      const i = Math.floor(t / minute) - first;
      if (i >= 0 && i < buckets) counts[i]++;
    }
    const element = box.current!;
    const plot = new uPlot(
      {
        width: element.clientWidth || 800,
        height: 160,
        legend: { show: false },
        scales: { x: { time: true } },
        axes: [{}, { size: 40 }],
        series: [
          {},
          { label: "Requests", stroke: "#2f6f5e", fill: "rgba(47,111,94,0.15)", paths: uPlot.paths.bars!() },
        ],
      },
      [xs, counts],
      element,
    );
    return () => plot.destroy();
  }, [times, start, end]);
  return <div className="chart" ref={box} aria-label="Requests over time" role="img" />;
}
