/**
 * The loss chart of one or several jobs: train loss (raw and smoothed) and eval loss per job, with a
 * smoothing control, a log-scale switch, a legend and the values under the pointer. The panel's
 * detail view and a notebook output (the job-reference renderer) both draw this one component.
 */
import React, { useState } from 'react';

import {
  axesOf,
  fraction,
  IAxis,
  IChartJob,
  IChartOptions,
  ISeries,
  isReward,
  lossSeries,
  pickableSeries,
  pointsOf,
  stepAt,
  valuesAt
} from '../chart';
import { IPoint } from '../model';
import { formatNumber, IBox, LineChart } from './LineChart';

export interface IJobChartProps {
  jobs: IChartJob[];
  /** The options it starts with; the reader changes them with the controls. */
  options: IChartOptions;
  width: number;
  height: number;
}

/** SVG `points` of a series in the box; points a log axis cannot show are left out. */
export function svgPoints(
  points: IPoint[],
  axes: { x: IAxis; y: IAxis },
  box: IBox
): string {
  const width = box.width - box.left - box.right;
  const height = box.height - box.top - box.bottom;
  return points
    .map(point => [fraction(point.x, axes.x), fraction(point.y, axes.y)])
    .filter(([x, y]) => x !== null && y !== null)
    .map(
      ([x, y]) =>
        `${round(box.left + x! * width)},${round(box.top + height - y! * height)}`
    )
    .join(' ');
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

function Line(props: {
  series: ISeries;
  axes: { x: IAxis; y: IAxis };
  box: IBox;
}): JSX.Element {
  const { series, axes, box } = props;
  const points = svgPoints(series.points, axes, box);
  return (
    <g className={`nbt-JobChart-series nbt-mod-${series.kind}`}>
      {series.raw.length > 0 && (
        <polyline
          className="nbt-JobChart-raw"
          fill="none"
          stroke={series.color}
          points={svgPoints(series.raw, axes, box)}
        />
      )}
      <polyline
        className="nbt-JobChart-line"
        fill="none"
        stroke={series.color}
        strokeDasharray={series.kind === 'eval' ? '5 3' : undefined}
        points={points}
        data-series={series.label}
        data-steps={series.points.map(point => point.x).join(',')}
      />
      {series.kind === 'eval' &&
        points
          .split(' ')
          .filter(Boolean)
          .map(xy => {
            const [x, y] = xy.split(',');
            return <circle key={xy} cx={x} cy={y} r={3} fill={series.color} />;
          })}
    </g>
  );
}

export function JobChart(props: IJobChartProps): JSX.Element {
  const { jobs, width, height } = props;
  const [options, setOptions] = useState(props.options);
  const [hover, setHover] = useState<number | null>(null);
  const series = lossSeries(jobs, options);
  const axes = axesOf(series, options.logScale);
  const box: IBox = { width, height, left: 56, right: 8, top: 8, bottom: 20 };
  const innerWidth = width - box.left - box.right;
  const onMove = (event: React.MouseEvent<SVGSVGElement>) => {
    if (axes) {
      const bounds = event.currentTarget.getBoundingClientRect();
      setHover(
        stepAt((event.clientX - bounds.left - box.left) / innerWidth, axes.x)
      );
    }
  };
  const hovered = hover !== null && axes ? valuesAt(series, hover) : [];
  const hoverStep = hovered.length ? hovered[0].point.x : null;
  return (
    <div className="nbt-JobChart">
      <div className="nbt-JobChart-controls">
        <label>
          {'smoothing '}
          <input
            type="range"
            min={0}
            max={0.99}
            step={0.01}
            value={options.smoothing}
            onChange={event =>
              setOptions({ ...options, smoothing: Number(event.target.value) })
            }
          />
          <span className="nbt-JobChart-smoothing">
            {options.smoothing.toFixed(2)}
          </span>
        </label>
        <label>
          <input
            type="checkbox"
            checked={options.logScale}
            onChange={event =>
              setOptions({ ...options, logScale: event.target.checked })
            }
          />
          {' log scale'}
        </label>
      </div>
      <svg
        className="nbt-JobChart-plot"
        width={width}
        height={height}
        role="img"
        aria-label="loss"
        onMouseMove={onMove}
        onMouseLeave={() => setHover(null)}
      >
        {axes ? (
          <>
            <g className="nbt-LineChart-labels">
              <text x={box.left - 4} y={box.top + 8} textAnchor="end">
                {formatNumber(axes.y.max)}
              </text>
              <text x={box.left - 4} y={height - box.bottom} textAnchor="end">
                {formatNumber(axes.y.min)}
              </text>
              <text x={box.left} y={height - 4}>{`step ${axes.x.min}`}</text>
              <text
                x={width - box.right}
                y={height - 4}
                textAnchor="end"
              >{`step ${axes.x.max}`}</text>
              <rect
                className="nbt-LineChart-frame"
                x={box.left}
                y={box.top}
                width={innerWidth}
                height={height - box.top - box.bottom}
              />
            </g>
            {series.map(line => (
              <Line key={line.label} series={line} axes={axes} box={box} />
            ))}
            {hoverStep !== null && (
              <line
                className="nbt-JobChart-cursor"
                x1={box.left + fraction(hoverStep, axes.x)! * innerWidth}
                x2={box.left + fraction(hoverStep, axes.x)! * innerWidth}
                y1={box.top}
                y2={height - box.bottom}
              />
            )}
          </>
        ) : (
          <text
            x={width / 2}
            y={height / 2}
            textAnchor="middle"
            className="nbt-LineChart-note"
          >
            loss: no data yet
          </text>
        )}
      </svg>
      <ul className="nbt-JobChart-legend">
        {series.map(line => (
          <li
            key={line.label}
            style={{ color: line.color }}
            className={`nbt-mod-${line.kind}`}
          >
            {line.label}
          </li>
        ))}
      </ul>
      {hovered.length > 0 && (
        <div className="nbt-JobChart-hover" role="status">
          {hovered.map(({ series: line, point }) => (
            <span
              key={line.label}
              style={{ color: line.color }}
            >{`${line.label} @ step ${point.x}: ${formatNumber(point.y)}`}</span>
          ))}
        </div>
      )}
    </div>
  );
}

/** A job as followed (IFollowedJob) for the chart: its id and name once the server has answered. */
export function chartJob(
  id: string,
  job: { name: string } | null,
  records: IChartJob['records']
): IChartJob {
  return { id, name: job?.name ?? id, records };
}

/** The loss chart of these jobs and, for a single job, its throughput: what the detail view and a notebook show. */
export function JobCharts(props: {
  jobs: IChartJob[];
  options: IChartOptions;
}): JSX.Element {
  const { jobs, options } = props;
  const series = jobs.length === 1 ? pickableSeries(jobs[0].records) : [];
  const rewards = series.filter(isReward);
  // a reward run (DPO, GRPO, a reward model) shows its first reward series at once; any run can pick another
  const [picked, setPicked] = useState<string>('');
  const shown = series.includes(picked) ? picked : (rewards[0] ?? '');
  return (
    <div className="nbt-JobDetail-charts">
      <JobChart jobs={jobs} options={options} width={420} height={180} />
      {jobs.length === 1 && (
        <LineChart
          points={pointsOf(jobs[0].records, 'samples_per_second', 'train')}
          width={420}
          height={180}
          labelled
          title="samples/s"
        />
      )}
      {series.length > 0 && (
        <div className="nbt-JobChart-picked">
          <select
            aria-label="series"
            value={shown}
            onChange={event => setPicked(event.target.value)}
          >
            <option value="">another series ...</option>
            {series.map(key => (
              <option key={key} value={key}>
                {key}
              </option>
            ))}
          </select>
          {shown && (
            <LineChart
              points={pointsOf(jobs[0].records, shown, 'train')}
              width={420}
              height={180}
              labelled
              title={shown}
            />
          )}
        </div>
      )}
    </div>
  );
}
