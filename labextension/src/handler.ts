/**
 * The typed REST client of the nbtoolkit server extension. Its types are api.gen.ts's, generated from
 * nbtoolkit/server/openapi.yaml, itself generated from the server's models (`make api-types`).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { components, paths } from './api.gen';

type Schemas = components['schemas'];

/** One row of the job list: the CLI's display strings plus the raw numbers the panel draws. */
export type IJobSummary = Schemas['JobSummary'];
export type IJobDetail = Schemas['JobDetail'];
export type IJobList = Schemas['JobList'];
export type IMetricsPage = Schemas['MetricsPage'];
/** A metrics.jsonl record: time, step, kind, and whatever numbers the run logged. */
export type IMetricRecord = IMetricsPage['records'][number];
export type ILogPage = Schemas['LogPage'];
export type IListOptions = NonNullable<
  paths['/jobs']['get']['parameters']['query']
>;

/** What the log endpoint serves: the program's own output (`raw`) or one line per logging step (`console`). */
export type LogView = NonNullable<
  NonNullable<paths['/jobs/{id}/log']['get']['parameters']['query']>['view']
>;

/** What the panel needs from the server; the panel's tests give it a fake. */
export interface IJobsAPI {
  listJobs(options?: IListOptions): Promise<IJobList>;
  /** The job; the very object returned last time when the server says it has not changed (304). */
  getJob(id: string): Promise<IJobDetail>;
  /** Records after cursor `since`; with `points`, a long rest comes downsampled to about that many. */
  metrics(id: string, since: number, points?: number): Promise<IMetricsPage>;
  /** Log text after `offset`: as the program wrote it (`raw`), or one line per logging step (`console`). */
  log(
    id: string,
    offset: number,
    view?: LogView,
    limit?: number
  ): Promise<ILogPage>;
  stop(id: string): Promise<IJobDetail>;
}

/** A failed API call, with the server's one-sentence message. */
export class APIError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

/** Call the API at `nbtoolkit/api/<endPoint>`; rejects with an APIError that says what went wrong. */
export async function requestAPI<T>(
  endPoint: string,
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  return (await fetchAPI<T>(endPoint, init, settings)).body as T;
}

/** requestAPI's call, with the response's status and ETag; a 304 (Not Modified) has no body. */
async function fetchAPI<T>(
  endPoint: string,
  init: RequestInit,
  settings: ServerConnection.ISettings
): Promise<{ body: T | null; status: number; etag: string | null }> {
  const url = URLExt.join(settings.baseUrl, 'nbtoolkit', 'api', endPoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new APIError(`cannot reach the Jupyter server (${error})`, 0);
  }
  const text = await response.text();
  let body: any = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok && response.status !== 304) {
    const reason = body?.message || `${response.status} ${response.statusText}`;
    throw new APIError(
      `the job API answered ${response.status}: ${reason}`,
      response.status
    );
  }
  return {
    body: body as T | null,
    status: response.status,
    etag: response.headers.get('ETag')
  };
}

export class JobsClient implements IJobsAPI {
  constructor(private readonly settings = ServerConnection.makeSettings()) {}

  listJobs(options: IListOptions = {}): Promise<IJobList> {
    const query: { [key: string]: string } = {};
    if (options.status?.length) {
      query.status = options.status.join(',');
    }
    if (options.limit !== undefined) {
      query.limit = String(options.limit);
    }
    if (options.offset !== undefined) {
      query.offset = String(options.offset);
    }
    return this.get<IJobList>('jobs', query);
  }

  /** Asks with the last reply's ETag: a job that did not change costs the server no body (304). */
  async getJob(id: string): Promise<IJobDetail> {
    const known = this._jobs.get(id);
    const reply = await fetchAPI<IJobDetail>(
      jobPath(id),
      known ? { headers: { 'If-None-Match': known.etag } } : {},
      this.settings
    );
    if (reply.status === 304 && known) {
      return known.job;
    }
    const job = reply.body as IJobDetail;
    if (reply.etag) {
      this._jobs.set(id, { etag: reply.etag, job });
    }
    return job;
  }

  metrics(id: string, since: number, points?: number): Promise<IMetricsPage> {
    const query: { [key: string]: string } = { since: String(since) };
    if (points !== undefined) {
      query.points = String(points);
    }
    return this.get<IMetricsPage>(jobPath(id, 'metrics'), query);
  }

  log(
    id: string,
    offset: number,
    view?: LogView,
    limit?: number
  ): Promise<ILogPage> {
    const query: { [key: string]: string } = { offset: String(offset) };
    if (limit !== undefined) {
      query.limit = String(limit);
    }
    if (view !== undefined) {
      query.view = view;
    }
    return this.get<ILogPage>(jobPath(id, 'log'), query);
  }

  stop(id: string): Promise<IJobDetail> {
    return requestAPI<IJobDetail>(
      jobPath(id, 'stop'),
      { method: 'POST' },
      this.settings
    );
  }

  /** The last reply per job, with its ETag (one small object per job viewed). */
  private readonly _jobs = new Map<string, { etag: string; job: IJobDetail }>();

  private get<T>(
    path: string,
    query: { [key: string]: string } = {}
  ): Promise<T> {
    return requestAPI<T>(
      path + URLExt.objectToQueryString(query),
      {},
      this.settings
    );
  }
}

function jobPath(id: string, ...rest: string[]): string {
  return ['jobs', encodeURIComponent(id), ...rest].join('/');
}
