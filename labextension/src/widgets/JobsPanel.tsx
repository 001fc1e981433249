/**
 * The left-sidebar widget: renders the job list whenever the model changes; tells the model
 * when it is shown or hidden so polling stands by while nobody looks.
 */
import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import React from 'react';

import { JobList } from '../components/JobList';
import { IJobActions } from '../components/JobRow';
import { jobsIcon } from '../icons';
import { JobsModel } from '../model';

export class JobsPanel extends ReactWidget {
  constructor(
    readonly model: JobsModel,
    private readonly _actions: IJobActions
  ) {
    super();
    this.id = 'nbtoolkit-jobs';
    this.addClass('nbt-JobsPanel');
    this.title.icon = jobsIcon;
    this.title.caption = 'nbtoolkit jobs';
  }

  protected onAfterAttach(message: Message): void {
    super.onAfterAttach(message); // renders
    this.model.setVisible(this.isVisible);
  }

  protected onAfterShow(message: Message): void {
    super.onAfterShow(message);
    this.model.setVisible(true);
  }

  protected onAfterHide(message: Message): void {
    super.onAfterHide(message);
    this.model.setVisible(false);
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this.model.changed}>
        {() => (
          <JobList
            {...this.model.state}
            actions={this._actions}
            onRefresh={() => void this.model.refresh()}
          />
        )}
      </UseSignal>
    );
  }
}
