import {
  IJobDetail,
  IJobList,
  IJobsAPI,
  IJobSummary,
  ILogPage,
  IMetricsPage
} from '../handler';

export function job(values: Partial<IJobSummary> = {}): IJobSummary {
  return {
    id: '0a1b2c3d',
    name: 'emotion-bert',
    task: 'text-classification',
    backend: 'torchrun',
    status: 'running',
    active: true,
    stage: 'train',
    display: {
      status: 'running',
      progress: '30/120',
      loss: '0.8123',
      'samples/s': '45.2',
      elapsed: '0:40',
      remaining: '2:00',
      cost: '$0.05',
      projected: '$0.20'
    },
    step: 30,
    total_steps: 120,
    loss: 0.8123,
    samples_per_second: 45.2,
    created: 1000,
    started: 1001,
    ended: null,
    elapsed_seconds: 40,
    remaining_seconds: 120,
    cost_usd: 0.05,
    projected_cost_usd: 0.2,
    budget: null,
    message: null,
    warning: null,
    loss_series: [2.0, 1.4, 1.1, 0.8],
    health_state: null,
    url: null,
    ...values
  };
}

export function detail(values: Partial<IJobDetail> = {}): IJobDetail {
  return {
    ...job(),
    host: 'here',
    exit_code: null,
    stages: [],
    resumed_from: null,
    info: {},
    planned: [],
    tracking: [],
    model_from: null,
    harness: null,
    ...values
  };
}

/** An API whose answers the test queues, recording every call. */
export class FakeAPI implements IJobsAPI {
  calls: string[] = [];
  lists: (IJobList | Error)[] = [];
  details: IJobDetail[] = [];
  metricPages: IMetricsPage[] = [];
  logPages: ILogPage[] = [];

  async listJobs(): Promise<IJobList> {
    this.calls.push('list');
    const next = this.lists.length > 1 ? this.lists.shift()! : this.lists[0];
    if (next instanceof Error) {
      throw next;
    }
    return next;
  }
  async getJob(id: string): Promise<IJobDetail> {
    this.calls.push(`job ${id}`);
    return this.details.length > 1 ? this.details.shift()! : this.details[0];
  }
  async metrics(
    id: string,
    since: number,
    points?: number
  ): Promise<IMetricsPage> {
    this.calls.push(
      `metrics ${id} since ${since}${points ? ` points ${points}` : ''}`
    );
    return this.metricPages.shift()!;
  }
  async log(id: string, offset: number, view?: string): Promise<ILogPage> {
    this.calls.push(`log ${id} offset ${offset}${view ? ` ${view}` : ''}`);
    return this.logPages.shift()!;
  }
  async stop(id: string): Promise<IJobDetail> {
    this.calls.push(`stop ${id}`);
    return detail({ id, status: 'stopped', active: false });
  }
}

export function list(jobs: IJobSummary[], total = jobs.length): IJobList {
  return { jobs, total, limit: 100, offset: 0 };
}
