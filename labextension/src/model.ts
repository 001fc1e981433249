/**
 * View state of the job panel and of one job's detail view. Everything comes from the server,
 * so a page reload loses nothing; polling is fast while jobs run and backs off when idle or hidden.
 */
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { IJobDetail, IJobsAPI, IJobSummary, IMetricRecord } from './handler';

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
/** A chart's first read of a long run asks for about this many points (the server downsamples the rest). */
export const CHART_POINTS = 500;
/** The detail view starts its log this many bytes before the end. */
export const LOG_TAIL_BYTES = 64 * 1024;
/** ...and keeps at most this many characters of it. */
export const LOG_KEEP_CHARS = 256 * 1024;

export interface IPoint {
  x: number;
  y: number;
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

/**
 * State read from the server, again and again by a Poll. Views re-render on `changed`. A failed
 * read keeps the last state with the error's sentence in `error`, and the Poll backs off.
 */
export abstract class ServerState<T extends { error: string | null }> {
  constructor(private _state: T) {}

  get changed(): ISignal<this, void> {
    return this._changed;
  }
  get state(): T {
    return this._state;
  }

  /** Read once from the server. */
  async refresh(): Promise<void> {
    try {
      this._state = { ...(await this.read(this._state)), error: null };
    } catch (error) {
      this._state = { ...this._state, error: messageOf(error) };
    }
    this._changed.emit();
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    this._disposed = true;
    this.poll?.dispose();
    this.poll = null;
    Signal.clearData(this);
  }

  /** The next state, from what the server says now. */
  protected abstract read(state: T): Promise<T>;

  /** Show a state now, before the server is asked (a view's own choice). */
  protected show(state: T): void {
    this._state = state;
    this._changed.emit();
  }

  /** Start polling; the first read happens at once. */
  protected startPolling(
    name: string,
    frequency: IFrequency,
    standby: Poll.Standby | (() => boolean | Poll.Standby)
  ): void {
    if (this.poll) {
      return;
    }
    this.poll = new Poll({
      factory: async () => {
        await this.refresh();
        if (this._state.error) {
          throw new Error(this._state.error); // lets the Poll back off
        }
      },
      frequency,
      standby,
      name
    });
  }

  protected poll: Poll | null = null;
  private _changed = new Signal<this, void>(this);
  private _disposed = false;
}

type IFrequency = { interval: number; backoff: boolean; max: number };

export interface IJobListState {
  jobs: IJobSummary[];
  /** Jobs in the store, beyond the page shown. */
  total: number;
  /** Whether a list has arrived yet. */
  loaded: boolean;
  /** The last refresh's error, as a sentence; null when it worked. */
  error: string | null;
}

/** The job list the sidebar panel shows. */
export class JobsModel extends ServerState<IJobListState> {
  constructor(
    readonly api: IJobsAPI,
    private _settings: IRefreshSettings = DEFAULT_REFRESH
  ) {
    super({ jobs: [], total: 0, loaded: false, error: null });
    this._interval = longestWait(_settings);
  }

  get settings(): IRefreshSettings {
    return this._settings;
  }
  /** The current wait between polls, in milliseconds. */
  get interval(): number {
    return this._interval;
  }

  async refresh(): Promise<void> {
    await super.refresh();
    this._syncPoll();
  }

  start(): void {
    this.startPolling('nbtoolkit:jobs', this._frequency(), 'when-hidden');
  }

  /**
   * The panel shows or hides. Hidden (or never shown), the list is read once per idle interval, only so that
   * notifications still come when a job ends; shown again, it refreshes at once.
   */
  setVisible(visible: boolean): void {
    this._visible = visible;
    this._interval = visible
      ? this._settings.interval
      : longestWait(this._settings);
    this._syncPoll();
    if (visible && this.poll) {
      void this.poll.refresh();
    }
  }

  updateSettings(settings: IRefreshSettings): void {
    this._settings = settings;
    this.setVisible(this._visible);
  }

  protected async read(): Promise<IJobListState> {
    const page = await this.api.listJobs({ limit: LIST_LIMIT });
    const print = fingerprint(page.jobs);
    const changed = print !== this._fingerprint;
    this._fingerprint = print;
    this._interval = this._visible
      ? nextInterval(
          this._interval,
          this._settings,
          page.jobs.some(job => job.active),
          changed
        )
      : longestWait(this._settings);
    return { jobs: page.jobs, total: page.total, loaded: true, error: null };
  }

  private _frequency(): IFrequency {
    return {
      interval: this._interval,
      backoff: true,
      max: longestWait(this._settings)
    };
  }

  private _syncPoll(): void {
    if (this.poll) {
      this.poll.frequency = this._frequency();
    }
  }

  private _fingerprint = '';
  private _interval: number;
  private _visible = false;
}

/** What must differ for a followed job to count as changed (the server's elapsed time and cost do not count). */
function progressPrint(job: IJobDetail): string {
  return `${job.status}:${job.stage}:${job.step}:${job.message}`;
}

/** Followers per API and job id: every view of a job (its detail view, chart outputs) shares one. */
const sharedFollowers = new WeakMap<IJobsAPI, Map<string, JobFollower>>();

export interface IFollowedJob {
  job: IJobDetail | null;
  records: IMetricRecord[];
  log: string;
  /** The log as the program wrote it, or (the default) one line per logging step as every console shows it. */
  rawLog: boolean;
  error: string | null;
  /** The job has ended and everything it wrote has been read. */
  done: boolean;
}

/**
 * One job followed for its views: the job, its metric records, and its log tail. Views share one follower
 * per job (`acquire`/`release`), so one poll serves them all. It polls at the base interval while the job
 * makes progress and backs off while nothing changes; it stands by while the page is hidden.
 */
export class JobFollower extends ServerState<IFollowedJob> {
  constructor(
    readonly api: IJobsAPI,
    readonly id: string,
    private readonly _settings: IRefreshSettings = DEFAULT_REFRESH,
    /** Follow the log too (the detail view), or only the job and its metrics (a notebook chart). */
    private _withLog = true
  ) {
    super({
      job: null,
      records: [],
      log: '',
      rawLog: false,
      error: null,
      done: false
    });
    this._interval = _settings.interval;
  }

  /**
   * The follower of this job that every view shares (made on first use), started; each `acquire` needs one
   * `release`. `withLog`: this view shows the log, so the shared follower reads it from now on.
   */
  static acquire(
    api: IJobsAPI,
    id: string,
    settings: IRefreshSettings = DEFAULT_REFRESH,
    withLog = true
  ): JobFollower {
    let followers = sharedFollowers.get(api);
    if (!followers) {
      followers = new Map();
      sharedFollowers.set(api, followers);
    }
    let follower = followers.get(id);
    if (!follower) {
      follower = new JobFollower(api, id, settings, withLog);
      followers.set(id, follower);
    } else if (withLog) {
      follower._followLog();
    }
    follower._holders += 1;
    follower.start();
    return follower;
  }

  /** A view no longer shows the job: the last one to go stops the poll. */
  release(): void {
    this._holders -= 1;
    if (this._holders <= 0) {
      sharedFollowers.get(this.api)?.delete(this.id);
      this.dispose();
    }
  }

  /** The current wait between polls, in milliseconds. */
  get interval(): number {
    return this._interval;
  }

  async refresh(): Promise<void> {
    await super.refresh();
    if (this.poll) {
      this.poll.frequency = this.state.done
        ? { interval: Poll.NEVER, backoff: false, max: Poll.NEVER }
        : this._frequency();
    }
  }

  start(): void {
    this.startPolling(
      `nbtoolkit:job-${this.id}`,
      this._frequency(),
      'when-hidden'
    );
  }

  /**
   * Only what is new: metric records after the cursor (a long run's first read comes downsampled), log text
   * after the offset. The job comes from the client's cache when the server says it did not change (304): then
   * nothing was written either, and a running job costs one request.
   */
  protected async read(state: IFollowedJob): Promise<IFollowedJob> {
    const job = await this.api.getJob(this.id);
    if (job === state.job && job.active && !this._logReset) {
      this._interval = nextInterval(
        this._interval,
        this._settings,
        false,
        false
      );
      return { ...state, error: null };
    }
    const metrics = await this.api.metrics(
      this.id,
      this._metricsCursor,
      CHART_POINTS
    );
    const log = this._withLog
      ? await this.api.log(
          this.id,
          this._logOffset ?? -LOG_TAIL_BYTES,
          this._rawLog ? 'raw' : 'console'
        )
      : null;
    this._metricsCursor = metrics.next;
    this._logOffset = log?.next ?? null;
    const shown = this._logReset ? '' : state.log;
    this._logReset = false;
    const changed =
      state.job === null ||
      progressPrint(job) !== progressPrint(state.job) ||
      metrics.records.length > 0 ||
      Boolean(log?.text);
    this._interval = nextInterval(
      this._interval,
      this._settings,
      false,
      changed
    );
    return {
      job,
      records: metrics.records.length
        ? [...state.records, ...metrics.records]
        : state.records,
      log: log ? trimLog(shown + log.text) : shown,
      rawLog: this._rawLog,
      error: null,
      done: !job.active && !metrics.records.length && !log?.text
    };
  }

  /**
   * Show the log as the program wrote it (`raw`) or one line per logging step: read again from its tail, now.
   */
  async showRawLog(raw: boolean): Promise<void> {
    if (raw === this._rawLog) {
      return;
    }
    this._rawLog = raw;
    this._logOffset = null;
    this._logReset = true;
    this.show({ ...this.state, rawLog: raw, log: '' }); // the box follows the click at once
    this._interval = this._settings.interval;
    await this.refresh();
  }

  /** A view that shows the log joined: read it from its tail at the next poll, which comes now. */
  private _followLog(): void {
    if (this._withLog) {
      return;
    }
    this._withLog = true;
    this._interval = this._settings.interval;
    if (this.poll) {
      this.poll.frequency = this._frequency();
      void this.poll.refresh();
    }
  }

  private _frequency(): IFrequency {
    return {
      interval: this._interval,
      backoff: true,
      max: longestWait(this._settings)
    };
  }

  private _holders = 0;
  private _interval: number;
  private _metricsCursor = 0;
  private _logOffset: number | null = null;
  private _rawLog = false;
  /** The log's view changed: read it again from its tail, whatever the job says. */
  private _logReset = false;
}
