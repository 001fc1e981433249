/**
 * What the loss chart draws, as plain data: one train and one eval series per job, smoothed, on a linear
 * or log axis, with the values under the pointer. The JobChart component only lays these out as SVG.
 */
import { IMetricRecord } from './handler';
import { IPoint } from './model';

/** The MIME type of a job reference in a notebook output: the kernel sends it once, the browser draws it. */
export const JOB_MIME = 'application/vnd.nbtoolkit.job+json';

/** matplotlib's tab10, so a job has the colour its saved image (drawn in the kernel) gives it. */
export const COLORS = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f'
];

/** The kernel's default weight of the moving average drawn over the raw loss. */
export const DEFAULT_SMOOTHING = 0.6;

export interface IChartOptions {
  /** 0 (none) up to 0.99: the weight of the moving average over the train loss. */
  smoothing: number;
  logScale: boolean;
}

/** The job-reference payload: which jobs to chart, and how. */
export interface IJobReference {
  job_ids: string[];
  options?: Partial<{ smoothing: number; log_scale: boolean }>;
}

/** One job's records, as the chart reads them. */
export interface IChartJob {
  id: string;
  name: string;
  records: IMetricRecord[];
}

export interface ISeries {
  /** What the legend says. */
  label: string;
  kind: 'train' | 'eval';
  color: string;
  /** The points drawn (train: smoothed when smoothing is on). */
  points: IPoint[];
  /** The raw train loss under a smoothed line (empty without smoothing, and for eval). */
  raw: IPoint[];
}

/** Exponential moving average (0 <= weight < 1), debiased so early points are not pulled to zero (as the kernel's). */
export function smoothed(values: number[], weight: number): number[] {
  let average = 0;
  return values.map((value, index) => {
    average = weight * average + (1 - weight) * value;
    return average / (1 - weight ** (index + 1));
  });
}

/** `key` against the step over the records of one kind. */
export function pointsOf(
  records: IMetricRecord[],
  key: string,
  kind: string
): IPoint[] {
  return records
    .filter(
      record =>
        record.kind === kind &&
        typeof record.step === 'number' &&
        typeof record[key] === 'number'
    )
    .map(record => ({ x: record.step as number, y: record[key] as number }));
}

/** What a record carries that is not a series to pick: its place in the run, and the loss the main chart draws. */
const NOT_PICKABLE = new Set([
  'step',
  'epoch',
  'time',
  'max_steps',
  'loss',
  'window_seconds'
]);

/** A reward model's series as TRL's RewardTrainer logs them (nbtoolkit/metrics/rewards.py REWARD_MODEL_KEYS). */
const REWARD_MODEL_SERIES = new Set(['accuracy', 'margin', 'mean_reward']);

/** Whether a train series is a reward: DPO's and GRPO's (`reward`, `rewards/...`) or a reward model's. */
export function isReward(key: string): boolean {
  return (
    key === 'reward' ||
    key.startsWith('rewards/') ||
    REWARD_MODEL_SERIES.has(key)
  );
}

/**
 * The numeric train series a reader can pick beside the loss: a reward run's first (TRL's names as
 * metrics.jsonl keeps them: `reward`, `rewards/<function>/mean`, `rewards/margins`; a reward model's
 * `accuracy`, `margin`, `mean_reward`), then the rest by name.
 */
export function pickableSeries(records: IMetricRecord[]): string[] {
  const keys = new Set<string>();
  for (const record of records) {
    if (record.kind !== 'train') {
      continue;
    }
    for (const [key, value] of Object.entries(record)) {
      if (typeof value === 'number' && !NOT_PICKABLE.has(key)) {
        keys.add(key);
      }
    }
  }
  const sorted = [...keys].sort();
  return [...sorted.filter(isReward), ...sorted.filter(key => !isReward(key))];
}

/** The options a job reference asks for, filled in with the defaults and clamped to what the chart draws. */
export function chartOptions(reference: IJobReference): IChartOptions {
  const smoothing = reference.options?.smoothing ?? DEFAULT_SMOOTHING;
  return {
    smoothing: Math.min(0.99, Math.max(0, smoothing)),
    logScale: reference.options?.log_scale ?? false
  };
}

/** Train and eval loss of each job, in the job's colour; labels name the job when there are several. */
export function lossSeries(
  jobs: IChartJob[],
  options: IChartOptions
): ISeries[] {
  return jobs.flatMap((job, index) => {
    const color = COLORS[index % COLORS.length];
    const prefix = jobs.length > 1 ? `${job.name} (${job.id}) ` : '';
    const train = pointsOf(job.records, 'loss', 'train');
    const values = smoothed(
      train.map(point => point.y),
      options.smoothing
    );
    const series: ISeries[] = [
      {
        label: `${prefix}train loss`,
        kind: 'train',
        color,
        points: train.map((point, at) => ({ x: point.x, y: values[at] })),
        raw: options.smoothing > 0 ? train : []
      },
      {
        label: `${prefix}eval loss`,
        kind: 'eval',
        color,
        points: pointsOf(job.records, 'eval_loss', 'eval'),
        raw: []
      }
    ];
    return series.filter(line => line.points.length > 0);
  });
}

export interface IAxis {
  min: number;
  max: number;
  log: boolean;
}

/** The span of every point drawn; on a log axis only positive values count (the others are not drawn). */
export function axesOf(
  series: ISeries[],
  logScale: boolean
): { x: IAxis; y: IAxis } | null {
  const all = series.flatMap(line => [...line.points, ...line.raw]);
  const ys = all
    .map(point => point.y)
    .filter(y => Number.isFinite(y) && (!logScale || y > 0));
  if (all.length === 0 || ys.length === 0) {
    return null;
  }
  const xs = all.map(point => point.x);
  return {
    x: { min: Math.min(...xs), max: Math.max(...xs), log: false },
    y: { min: Math.min(...ys), max: Math.max(...ys), log: logScale }
  };
}

/** Where a value lies along an axis, from 0 (min) to 1 (max); null where a log axis cannot show it. */
export function fraction(value: number, axis: IAxis): number | null {
  if (axis.log && value <= 0) {
    return null;
  }
  const at = (v: number) => (axis.log ? Math.log10(v) : v);
  const span = at(axis.max) - at(axis.min);
  return span === 0 ? 0.5 : (at(value) - at(axis.min)) / span;
}

/** The step nearest a horizontal fraction of the x axis. */
export function stepAt(position: number, axis: IAxis): number {
  return axis.min + Math.min(1, Math.max(0, position)) * (axis.max - axis.min);
}

/** Each series' point nearest `step` (what the hover box lists), skipping series with no point. */
export function valuesAt(
  series: ISeries[],
  step: number
): { series: ISeries; point: IPoint }[] {
  return series.map(line => {
    let best = line.points[0];
    for (const point of line.points) {
      if (Math.abs(point.x - step) < Math.abs(best.x - step)) {
        best = point;
      }
    }
    return { series: line, point: best };
  });
}
