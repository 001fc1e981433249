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

/** What the panel needs from the server; the panel's tests give it a fake. */
export interface IJobsAPI {
  listJobs(options?: IListOptions): Promise<IJobList>;
  getJob(id: string): Promise<IJobDetail>;
  metrics(id: string, since: number): Promise<IMetricsPage>;
  log(id: string, offset: number, limit?: number): Promise<ILogPage>;
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
  if (!response.ok) {
    const reason = body?.message || `${response.status} ${response.statusText}`;
    throw new APIError(
      `the job API answered ${response.status}: ${reason}`,
      response.status
    );
  }
  return body as T;
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

  getJob(id: string): Promise<IJobDetail> {
    return this.get<IJobDetail>(jobPath(id));
  }

  metrics(id: string, since: number): Promise<IMetricsPage> {
    return this.get<IMetricsPage>(jobPath(id, 'metrics'), {
      since: String(since)
    });
  }

  log(id: string, offset: number, limit?: number): Promise<ILogPage> {
    const query: { [key: string]: string } = { offset: String(offset) };
    if (limit !== undefined) {
      query.limit = String(limit);
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
