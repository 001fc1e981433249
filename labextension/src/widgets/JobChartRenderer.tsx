/**
 * A notebook output that references jobs (JOB_MIME): the browser follows them through the REST API
 * and draws the panel's chart, so the kernel sends one display message and nothing while jobs run.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { ReactWidget } from '@jupyterlab/ui-components';
import React from 'react';

import { chartOptions, IChartOptions, IJobReference, JOB_MIME } from '../chart';
import { chartJob, JobCharts } from '../components/JobChart';
import { IJobsAPI } from '../handler';
import { JobFollower } from '../model';

/** Each followed job's one line: name, id, status, progress and the row's facts (as the panel's list says it). */
function JobLine(props: { follower: JobFollower }): JSX.Element {
  const { job, error } = props.follower.state;
  if (error) {
    return (
      <div
        className="nbt-JobList-error"
        role="alert"
      >{`job ${props.follower.id}: ${error}`}</div>
    );
  }
  return (
    <div className="nbt-JobChartOutput-job">
      {job
        ? [
            job.name,
            job.id,
            job.display.status,
            job.display.progress,
            job.display.cost
          ]
            .filter(Boolean)
            .join(' · ')
        : `job ${props.follower.id}: loading`}
    </div>
  );
}

export class JobChartRenderer
  extends ReactWidget
  implements IRenderMime.IRenderer
{
  constructor(private readonly _api: IJobsAPI) {
    super();
    this.addClass('nbt-JobChartOutput');
  }

  /** Follow the referenced jobs (once: an output's reference does not change) until they end. */
  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const reference = model.data[JOB_MIME] as unknown as IJobReference;
    if (this._followers.length === 0) {
      this._options = chartOptions(reference);
      this._followers = reference.job_ids.map(id =>
        JobFollower.acquire(this._api, id, undefined, false)
      );
      for (const follower of this._followers) {
        follower.changed.connect(this._onChanged, this);
      }
    }
    this.update();
  }

  render(): JSX.Element {
    return (
      <>
        {this._followers.map(follower => (
          <JobLine key={follower.id} follower={follower} />
        ))}
        <JobCharts
          jobs={this._followers.map(follower =>
            chartJob(follower.id, follower.state.job, follower.state.records)
          )}
          options={this._options}
        />
      </>
    );
  }

  dispose(): void {
    for (const follower of this._followers) {
      follower.changed.disconnect(this._onChanged, this);
      follower.release();
    }
    super.dispose();
  }

  private _onChanged(): void {
    this.update();
  }

  private _followers: JobFollower[] = [];
  private _options: IChartOptions = chartOptions({ job_ids: [] });
}
