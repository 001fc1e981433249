/**
 * View state of the job panel and of one job's detail view. Everything comes from the server,
 * so a page reload loses nothing; polling is fast while jobs run and backs off when idle or hidden.
 */
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import {
  IJobDetail,
  IJobsAPI,
  IJobSummary,
  IMetricRecord,
  JobStatus
} from './handler';

export interface IRefreshSettings {
  /** Milliseconds between polls while a job is queued or running. */
  interval: number;
  /** The longest wait, in milliseconds, that polling backs off to while nothing runs. */
  idleInterval: number;
}

export const DEFAULT_REFRESH: IRefreshSettings = {
  interval: 2000,
  idleInterval: 30000
};
/** Jobs the panel lists (newest first). */
export const LIST_LIMIT = 100;
/** The detail view starts its log this many bytes before the end. */
export const LOG_TAIL_BYTES = 64 * 1024;
/** ...and keeps at most this many characters of it. */
export const LOG_KEEP_CHARS = 256 * 1024;

export interface IPoint {
  x: number;
  y: number;
}

export function isActive(job: { status: JobStatus }): boolean {
  return job.status === 'queued' || job.status === 'running';
}

/**
 * The wait before the next poll: the base interval while any job runs or the list just
 * changed, else twice the last wait, up to the idle interval.
 */
export function nextInterval(
  last: number,
  settings: IRefreshSettings,
  anyActive: boolean,
  changed: boolean
): number {
  if (anyActive || changed) {
    return settings.interval;
  }
  return Math.min(Math.max(last, settings.interval) * 2, longestWait(settings));
}

function longestWait(settings: IRefreshSettings): number {
  return Math.max(settings.idleInterval, settings.interval);
}

/** What must differ for the list to count as changed (new jobs, status, progress). */
export function fingerprint(jobs: IJobSummary[]): string {
  return jobs.map(job => `${job.id}:${job.status}:${job.step}`).join('|');
}

/** Steps done as a fraction of all steps, or null when the total is unknown. */
export function progressFraction(job: IJobSummary): number | null {
  if (!job.total_steps || job.step === null) {
    return null;
  }
  return Math.min(1, Math.max(0, job.step / job.total_steps));
}

/** The train records' `key` against their step, for a chart. */
export function seriesOf(
  records: IMetricRecord[],
  key: 'loss' | 'samples_per_second'
): IPoint[] {
  return records
    .filter(
      record =>
        record.kind === 'train' &&
        typeof record.step === 'number' &&
        typeof record[key] === 'number'
    )
    .map(record => ({ x: record.step as number, y: record[key] as number }));
}

/** The last `keep` characters of a log, starting at a line start. */
export function trimLog(text: string, keep = LOG_KEEP_CHARS): string {
  if (text.length <= keep) {
    return text;
  }
  const cut = text.slice(text.length - keep);
  const lineStart = cut.indexOf('\n');
  return lineStart < 0 ? cut : cut.slice(lineStart + 1);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The job list the sidebar panel shows, refreshed by a Poll. */
export class JobsModel {
  constructor(
    readonly api: IJobsAPI,
    private _settings: IRefreshSettings = DEFAULT_REFRESH
  ) {
    this._interval = _settings.interval;
  }

  get changed(): ISignal<JobsModel, void> {
    return this._changed;
  }
  get jobs(): IJobSummary[] {
    return this._jobs;
  }
  get total(): number {
    return this._total;
  }
  /** The last refresh's error, as a sentence; null when it worked. */
  get error(): string | null {
    return this._error;
  }
  /** Whether a list has arrived yet. */
  get loaded(): boolean {
    return this._loaded;
  }
  get settings(): IRefreshSettings {
    return this._settings;
  }
  /** The current wait between polls, in milliseconds. */
  get interval(): number {
    return this._interval;
  }

  /** Ask the server for the list once; errors become `error`, never an empty panel. */
  async refresh(): Promise<void> {
    try {
      const page = await this.api.listJobs({ limit: LIST_LIMIT });
      const print = fingerprint(page.jobs);
      const changed = print !== this._fingerprint;
      this._fingerprint = print;
      this._jobs = page.jobs;
      this._total = page.total;
      this._error = null;
      this._loaded = true;
      this._interval = nextInterval(
        this._interval,
        this._settings,
        page.jobs.some(isActive),
        changed
      );
    } catch (error) {
      this._error = messageOf(error);
    }
    this._syncPoll();
    this._changed.emit();
  }

  /** Start polling (the first poll runs at once). */
  start(): void {
    if (this._poll) {
      return;
    }
    this._poll = new Poll({
      factory: async () => {
        await this.refresh();
        if (this._error) {
          throw new Error(this._error); // lets the Poll back off
        }
      },
      frequency: this._frequency(),
      standby: () => (this._visible ? 'when-hidden' : true),
      name: 'nbtoolkit:jobs'
    });
  }

  /** The panel shows or hides: hidden, polling stands by; shown again, it refreshes at once. */
  setVisible(visible: boolean): void {
    this._visible = visible;
    if (visible && this._poll) {
      void this._poll.refresh();
    }
  }

  updateSettings(settings: IRefreshSettings): void {
    this._settings = settings;
    this._interval = settings.interval;
    this._syncPoll();
  }

  dispose(): void {
    this._poll?.dispose();
    this._poll = null;
    Signal.clearData(this);
  }

  private _frequency() {
    return {
      interval: this._interval,
      backoff: true,
      max: longestWait(this._settings)
    };
  }

  private _syncPoll(): void {
    if (this._poll) {
      this._poll.frequency = this._frequency();
    }
  }

  private _changed = new Signal<JobsModel, void>(this);
  private _jobs: IJobSummary[] = [];
  private _total = 0;
  private _error: string | null = null;
  private _loaded = false;
  private _fingerprint = '';
  private _interval: number;
  private _visible = true;
  private _poll: Poll | null = null;
}

/** One job followed for its detail view: the job, its metric records, and its log tail. */
export class JobFollower {
  constructor(
    readonly api: IJobsAPI,
    readonly id: string,
    private readonly _settings: IRefreshSettings = DEFAULT_REFRESH
  ) {}

  get changed(): ISignal<JobFollower, void> {
    return this._changed;
  }
  get job(): IJobDetail | null {
    return this._job;
  }
  get records(): IMetricRecord[] {
    return this._records;
  }
  get log(): string {
    return this._log;
  }
  get error(): string | null {
    return this._error;
  }
  /** The job has ended and everything it wrote has been read. */
  get done(): boolean {
    return this._done;
  }

  /** Fetch what is new: the job, metric records after the cursor, log text after the offset. */
  async update(): Promise<void> {
    try {
      const job = await this.api.getJob(this.id);
      const metrics = await this.api.metrics(this.id, this._metricsCursor);
      const log = await this.api.log(this.id, this._logOffset ?? -LOG_TAIL_BYTES);
      this._job = job;
      if (metrics.records.length) {
        this._records = [...this._records, ...metrics.records];
      }
      this._metricsCursor = metrics.next;
      this._log = trimLog(this._log + log.text);
      this._logOffset = log.next;
      this._done = !isActive(job) && !metrics.records.length && !log.text;
      this._error = null;
    } catch (error) {
      this._error = messageOf(error);
    }
    if (this._done && this._poll) {
      this._poll.frequency = { interval: Poll.NEVER, backoff: false, max: Poll.NEVER };
    }
    this._changed.emit();
  }

  start(): void {
    if (this._poll) {
      return;
    }
    this._poll = new Poll({
      factory: async () => {
        await this.update();
        if (this._error) {
          throw new Error(this._error);
        }
      },
      frequency: {
        interval: this._settings.interval,
        backoff: true,
        max: longestWait(this._settings)
      },
      standby: 'when-hidden',
      name: `nbtoolkit:job-${this.id}`
    });
  }

  dispose(): void {
    this._poll?.dispose();
    this._poll = null;
    Signal.clearData(this);
  }

  private _changed = new Signal<JobFollower, void>(this);
  private _job: IJobDetail | null = null;
  private _records: IMetricRecord[] = [];
  private _log = '';
  private _error: string | null = null;
  private _done = false;
  private _metricsCursor = 0;
  private _logOffset: number | null = null;
  private _poll: Poll | null = null;
}
