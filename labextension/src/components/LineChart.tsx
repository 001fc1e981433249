/**
 * A small SVG line chart: a bare sparkline in list rows, with value and step labels in the detail view.
 */
import React from 'react';

import { IPoint } from '../model';

export interface IBox {
  width: number;
  height: number;
  /** Room left free on each side, for labels. */
  left: number;
  right: number;
  top: number;
  bottom: number;
}

export interface IRange {
  min: number;
  max: number;
}

export function rangeOf(values: number[]): IRange {
  let min = Infinity;
  let max = -Infinity;
  for (const value of values) {
    min = Math.min(min, value);
    max = Math.max(max, value);
  }
  return { min, max };
}

/** The SVG polyline `points` of a series scaled into the box (y grows downward on screen). */
export function polylinePoints(points: IPoint[], box: IBox): string {
  if (points.length === 0) {
    return '';
  }
  const xs = rangeOf(points.map(point => point.x));
  const ys = rangeOf(points.map(point => point.y));
  const innerWidth = box.width - box.left - box.right;
  const innerHeight = box.height - box.top - box.bottom;
  const scale = (value: number, range: IRange, size: number) =>
    range.max === range.min
      ? size / 2
      : ((value - range.min) / (range.max - range.min)) * size;
  return points
    .map(point => {
      const x = box.left + scale(point.x, xs, innerWidth);
      const y = box.top + innerHeight - scale(point.y, ys, innerHeight);
      return `${round(x)},${round(y)}`;
    })
    .join(' ');
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

export function formatNumber(value: number): string {
  const size = Math.abs(value);
  if (size !== 0 && (size < 0.01 || size >= 100000)) {
    return value.toExponential(2);
  }
  return size >= 100 ? value.toFixed(0) : value.toPrecision(3);
}

export interface ILineChartProps {
  points: IPoint[];
  width: number;
  height: number;
  /** Draw value and step labels around the line (the detail view's charts). */
  labelled?: boolean;
  title?: string;
  className?: string;
}

export function LineChart(props: ILineChartProps): JSX.Element {
  const { points, width, height, labelled, title } = props;
  const box: IBox = labelled
    ? { width, height, left: 52, right: 8, top: 20, bottom: 18 }
    : { width, height, left: 1, right: 1, top: 1, bottom: 1 };
  const className = ['nbt-LineChart', props.className ?? ''].join(' ').trim();
  if (points.length < 2) {
    return (
      <svg
        className={`${className} nbt-mod-empty`}
        width={width}
        height={height}
        role="img"
      >
        {labelled && (
          <text
            x={width / 2}
            y={height / 2}
            textAnchor="middle"
            className="nbt-LineChart-note"
          >
            {title ? `${title}: no data yet` : 'no data yet'}
          </text>
        )}
      </svg>
    );
  }
  const ys = rangeOf(points.map(point => point.y));
  const first = points[0].x;
  const last = points[points.length - 1].x;
  return (
    <svg
      className={className}
      width={width}
      height={height}
      role="img"
      aria-label={title}
    >
      {labelled && (
        <g className="nbt-LineChart-labels">
          <text x={box.left} y={12}>
            {title}
          </text>
          <text x={box.left - 4} y={box.top + 4} textAnchor="end">
            {formatNumber(ys.max)}
          </text>
          <text x={box.left - 4} y={height - box.bottom} textAnchor="end">
            {formatNumber(ys.min)}
          </text>
          <text x={box.left} y={height - 4}>
            {`step ${first}`}
          </text>
          <text x={width - box.right} y={height - 4} textAnchor="end">
            {`step ${last}`}
          </text>
          <rect
            className="nbt-LineChart-frame"
            x={box.left}
            y={box.top}
            width={width - box.left - box.right}
            height={height - box.top - box.bottom}
          />
        </g>
      )}
      <polyline
        className="nbt-LineChart-line"
        fill="none"
        points={polylinePoints(points, box)}
      />
    </svg>
  );
}

/** The loss sparkline of a list row. */
export function Sparkline(props: { values: number[] }): JSX.Element {
  return (
    <LineChart
      className="nbt-Sparkline"
      points={props.values.map((y, x) => ({ x, y }))}
      width={84}
      height={22}
      title="loss"
    />
  );
}
