/**
 * A main-area view of one job (charts and log, or the log alone), following it until it ends.
 */
import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import React from 'react';

import { JobDetail } from '../components/JobDetail';
import { DoctorClient } from '../doctor';
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
    return (
      <UseSignal signal={this.follower.changed}>
        {() => (
          <JobDetail
            {...this.follower.state}
            charts={this._charts}
            doctor={this._doctor}
            onRawLog={raw => void this.follower.showRawLog(raw)}
          />
        )}
      </UseSignal>
    );
  }

  private readonly _doctor = new DoctorClient();

  dispose(): void {
    this.follower.release();
    super.dispose();
  }
}
