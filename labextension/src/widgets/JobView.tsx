/**
 * A main-area view of one job (charts and log, or the log alone), following it until it ends.
 */
import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import React from 'react';

import { JobDetail } from '../components/JobDetail';
import { JobFollower } from '../model';

export class JobView extends ReactWidget {
  constructor(
    readonly follower: JobFollower,
    private readonly _charts: boolean
  ) {
    super();
    this.addClass('nbt-JobView');
  }

  render(): JSX.Element {
    const follower = this.follower;
    return (
      <UseSignal signal={follower.changed}>
        {() => (
          <JobDetail
            job={follower.job}
            records={follower.records}
            log={follower.log}
            error={follower.error}
            charts={this._charts}
          />
        )}
      </UseSignal>
    );
  }

  dispose(): void {
    this.follower.dispose();
    super.dispose();
  }
}
