/**
 * The typed REST client of the nbtoolkit server extension (nbtoolkit/server/openapi.yaml).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export type JobStatus =
  | 'queued'
  | 'running'
  | 'succeeded'
  | 'failed'
  | 'stopped'
  | 'lost';

/** One row of the job list: the CLI's display strings plus the raw numbers the panel draws. */
export interface IJobSummary {
  id: string;
  name: string;
  task: string;
  backend: string;
  status: JobStatus;
  stage: string | null;
  /** `nbtoolkit jobs` columns as text: progress, loss, samples/s, elapsed, remaining, cost, ... */
  display: { [column: string]: string };
  step: number | null;
  total_steps: number | null;
  loss: number | null;
  samples_per_second: number | null;
  created: number;
  started: number | null;
  ended: number | null;
  elapsed_seconds: number | null;
  remaining_seconds: number | null;
  /** cost so far: a SageMaker job's from its billable time, else hourly price x elapsed */
  cost_usd: number | null;
  /** while running: cost so far plus the time left at the steady pace */
  projected_cost_usd: number | null;
  /** train.budget_usd's latest record, once the job has spent 90% of it */
  budget: IBudget | null;
  message: string | null;
  loss_series: number[];
}

/** Where a job stands against its train.budget_usd: warning at 90%, stopped (with a checkpoint) at 100%. */
export interface IBudget {
  reached: 'warning' | 'stopped';
  cost_usd: number;
  budget_usd: number;
  step: number;
  /** `$0.09 of the $0.10 budget spent (90%) at step 12` */
  summary: string;
}

export interface IJobDetail extends IJobSummary {
  host: string;
  exit_code: number | null;
  stages: { [key: string]: unknown }[];
  resumed_from: string | null;
  info: { [key: string]: unknown };
  /** The planner's forecast beside what the job measured, one line a quantity (as `nbtoolkit show`). */
  planned: string[];
  /** The run name and where each experiment tracker writes. */
  tracking: string[];
}

export interface IJobList {
  jobs: IJobSummary[];
  total: number;
  limit: number;
  offset: number;
}

/** A metrics.jsonl record: time, step, kind, and whatever numbers the run logged. */
export interface IMetricRecord {
  step?: number;
  kind?: string;
  loss?: number;
  samples_per_second?: number;
  [key: string]: unknown;
}

export interface IMetricsPage {
  records: IMetricRecord[];
  since: number;
  next: number;
  status: JobStatus;
}

export interface ILogPage {
  text: string;
  offset: number;
  next: number;
  size: number;
  status: JobStatus;
}

export interface IListOptions {
  status?: JobStatus[];
  limit?: number;
  offset?: number;
}

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
    throw new APIError(`the job API answered ${response.status}: ${reason}`, response.status);
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
    return this.get<IMetricsPage>(jobPath(id, 'metrics'), { since: String(since) });
  }

  log(id: string, offset: number, limit?: number): Promise<ILogPage> {
    const query: { [key: string]: string } = { offset: String(offset) };
    if (limit !== undefined) {
      query.limit = String(limit);
    }
    return this.get<ILogPage>(jobPath(id, 'log'), query);
  }

  stop(id: string): Promise<IJobDetail> {
    return requestAPI<IJobDetail>(jobPath(id, 'stop'), { method: 'POST' }, this.settings);
  }

  private get<T>(path: string, query: { [key: string]: string } = {}): Promise<T> {
    return requestAPI<T>(path + URLExt.objectToQueryString(query), {}, this.settings);
  }
}

function jobPath(id: string, ...rest: string[]): string {
  return ['jobs', encodeURIComponent(id), ...rest].join('/');
}
