/**
 * JupyterLab notifications (its own Notification API) when a job succeeds (with a warning when its numbers say it
 * learned nothing), fails, stalls or hits its budget,
 * each with an action that opens the job. Read from the job list the panel already polls; what changed
 * since the last list is worked out by `jobEvents`, pure, so it is tested without a page.
 */
import type { Notification } from '@jupyterlab/apputils';

import { IJobSummary } from './handler';
import { JobsModel } from './model';

/** What was known of a job at the last list. */
export interface ISeen {
  status: string;
  stalled: boolean;
}

export interface IJobEvent {
  kind: 'success' | 'error' | 'warning';
  message: string;
  job: IJobSummary;
}

/** The events between the last list (`seen`) and this one; a job first seen ended is news only if it began
 * after `since` (seconds), so the jobs of past days announce nothing when Lab opens. */
export function jobEvents(
  seen: Map<string, ISeen>,
  jobs: IJobSummary[],
  since: number
): IJobEvent[] {
  const events: IJobEvent[] = [];
  for (const job of jobs) {
    const before = seen.get(job.id);
    const stalled = job.health_state === 'stalled';
    seen.set(job.id, { status: job.status, stalled });
    const news = before ? before.status !== job.status : job.created >= since;
    if (stalled && !before?.stalled) {
      events.push({
        kind: 'warning',
        message: `job ${job.name} stalled: no rank has finished a step; its ranks' stacks are in its folder`,
        job
      });
    }
    if (!news || job.active) {
      continue;
    }
    if (job.status === 'succeeded') {
      events.push({
        kind: job.warning ? 'warning' : 'success',
        message: job.warning
          ? `job ${job.name} succeeded, but ${job.warning}`
          : `job ${job.name} succeeded`,
        job
      });
    } else if (job.status === 'failed') {
      const why = job.message ? `: ${job.message}` : '';
      events.push({
        kind: 'error',
        message: `job ${job.name} failed${why}`,
        job
      });
    } else if (job.budget?.reached === 'stopped') {
      events.push({
        kind: 'warning',
        message: `job ${job.name} hit its budget: ${job.budget.summary}`,
        job
      });
    }
  }
  return events;
}

/** Notify on every event of the model's job list through Lab's `Notification`; `open` shows the job. */
export function watchJobs(
  model: JobsModel,
  notification: typeof Notification,
  open: (job: IJobSummary) => void
): void {
  const seen = new Map<string, ISeen>();
  const since = Date.now() / 1000;
  model.changed.connect(() => {
    for (const event of jobEvents(seen, model.state.jobs, since)) {
      notification[event.kind](event.message, {
        autoClose: event.kind === 'success' ? 5000 : false,
        actions: [{ label: 'Open job', callback: () => open(event.job) }]
      });
    }
  });
}
