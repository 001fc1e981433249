/**
 * The panel's commands: open a job's charts or log, insert a `%job ID` cell, stop a job
 * (after a confirmation), refresh. The row buttons run these.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Dialog,
  MainAreaWidget,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';

import { IJobActions } from './components/JobRow';
import { IJobsAPI, IJobSummary } from './handler';
import { jobsIcon } from './icons';
import { JobFollower, JobsModel } from './model';
import { JobView } from './widgets/JobView';

export namespace CommandIDs {
  export const open = 'nbtoolkit:open-job';
  export const openLog = 'nbtoolkit:open-job-log';
  export const insertCell = 'nbtoolkit:insert-job-cell';
  export const stop = 'nbtoolkit:stop-job';
  export const refresh = 'nbtoolkit:refresh-jobs';
}

interface IJobArgs {
  id: string;
  name?: string;
}

function jobArgs(args: any): IJobArgs {
  return {
    id: String(args.id),
    name: args.name ? String(args.name) : undefined
  };
}

export function addCommands(
  app: JupyterFrontEnd,
  api: IJobsAPI,
  model: JobsModel,
  tracker: INotebookTracker | null
): IJobActions {
  const views = new Map<string, MainAreaWidget<JobView>>();

  const openView = (args: IJobArgs, charts: boolean) => {
    const key = `nbtoolkit-${charts ? 'job' : 'log'}-${args.id}`;
    const open = views.get(key);
    if (open && !open.isDisposed) {
      app.shell.activateById(open.id);
      return;
    }
    const follower = JobFollower.acquire(api, args.id, model.settings);
    const widget = new MainAreaWidget({
      content: new JobView(follower, charts)
    });
    widget.id = key;
    widget.title.label = `${charts ? 'job' : 'log'} ${args.name ?? args.id}`;
    widget.title.icon = jobsIcon;
    widget.title.closable = true;
    views.set(key, widget);
    app.shell.add(widget, 'main');
    app.shell.activateById(widget.id);
  };

  app.commands.addCommand(CommandIDs.open, {
    label: 'Open Job Charts and Log',
    execute: args => openView(jobArgs(args), true)
  });

  app.commands.addCommand(CommandIDs.openLog, {
    label: 'Open Job Log',
    execute: args => openView(jobArgs(args), false)
  });

  app.commands.addCommand(CommandIDs.insertCell, {
    label: 'Insert %job Cell',
    execute: async args => {
      const { id } = jobArgs(args);
      const notebook = tracker?.currentWidget;
      if (!notebook) {
        await showErrorMessage(
          'No notebook to insert into',
          `Open a notebook, then insert the %job ${id} cell again.`
        );
        return;
      }
      await notebook.context.ready; // a notebook still loading would drop the new cell
      const active = notebook.content.activeCell;
      const reusable =
        active?.model.type === 'code' &&
        !active.model.sharedModel.getSource().trim();
      if (!reusable) {
        NotebookActions.insertBelow(notebook.content);
      }
      notebook.content.activeCell?.model.sharedModel.setSource(`%job ${id}`);
      app.shell.activateById(notebook.id);
    }
  });

  app.commands.addCommand(CommandIDs.stop, {
    label: 'Stop Job',
    execute: async args => {
      const { id, name } = jobArgs(args);
      const answer = await showDialog({
        title: 'Stop this job?',
        body: `Stop ${name ?? 'job'} (${id}) and every process it started? Its log and metrics are kept.`,
        buttons: [
          Dialog.cancelButton(),
          Dialog.warnButton({ label: 'Stop job' })
        ]
      });
      if (!answer.button.accept) {
        return;
      }
      try {
        await api.stop(id);
      } catch (error) {
        await showErrorMessage('The job could not be stopped', error as Error);
      }
      await model.refresh();
    }
  });

  app.commands.addCommand(CommandIDs.refresh, {
    label: 'Refresh nbtoolkit Jobs',
    execute: () => model.refresh()
  });

  const run = (command: string) => (job: IJobSummary) =>
    void app.commands.execute(command, { id: job.id, name: job.name });
  return {
    open: run(CommandIDs.open),
    openLog: run(CommandIDs.openLog),
    insertCell: run(CommandIDs.insertCell),
    stop: run(CommandIDs.stop)
  };
}
