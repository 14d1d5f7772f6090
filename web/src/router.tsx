import { lazy } from 'react';
import { createBrowserRouter } from 'react-router';
import { NotFound } from './components/states.tsx';
import { ProjectLayout } from './components/ProjectLayout.tsx';
import { RequireUser } from './components/RequireUser.tsx';
import { ActivityPage } from './pages/Activity.tsx';
import { LoginPage, SignupPage } from './pages/Auth.tsx';
import { ForgotPasswordPage, ResetPasswordPage } from './pages/Password.tsx';
import { CampaignPage, CampaignReportPage, CampaignsPage, NewCampaignPage } from './pages/Campaigns.tsx';
import { ContactPage, ContactsPage } from './pages/Contacts.tsx';
import { DomainsPage } from './pages/Domains.tsx';
import { EmailPage } from './pages/Email.tsx';
import { EmailsPage } from './pages/Emails.tsx';
import { HomePage } from './pages/Home.tsx';
import { InvitationPage } from './pages/Invitation.tsx';
import { ProjectRedirect, ProjectsPage } from './pages/Projects.tsx';
import { SettingsPage } from './pages/Settings.tsx';
import { SuppressionsPage } from './pages/Suppressions.tsx';
import { TemplateEditorPage, TemplatesPage } from './pages/Templates.tsx';
import { WorkflowPage, WorkflowsPage } from './pages/Workflows.tsx';

// The charts library is loaded with the analytics page only, not with the first page.
const AnalyticsPage = lazy(() => import('./pages/Analytics.tsx'));
// The segments page (with its condition builder) is loaded when opened.
const SegmentsPage = lazy(() => import('./pages/Segments.tsx').then((m) => ({ default: m.SegmentsPage })));
const SegmentEditorPage = lazy(() => import('./pages/Segments.tsx').then((m) => ({ default: m.SegmentEditorPage })));
// So is the workflow editor.
const WorkflowEditorPage = lazy(() => import('./pages/WorkflowEditor.tsx').then((m) => ({ default: m.WorkflowEditorPage })));

/** Every page has a real URL under /app (the server answers any /app/* path with the app). */
export function createRouter() {
  return createBrowserRouter(
    [
      { path: '/login', element: <LoginPage /> },
      { path: '/signup', element: <SignupPage /> },
      { path: '/forgot-password', element: <ForgotPasswordPage /> },
      { path: '/reset-password', element: <ResetPasswordPage /> },
      {
        path: '/',
        element: <RequireUser />,
        children: [
          { index: true, element: <ProjectRedirect /> },
          { path: 'projects', element: <ProjectsPage /> },
          { path: 'invitation', element: <InvitationPage /> },
          {
            path: 'p/:projectId',
            element: <ProjectLayout />,
            children: [
              { index: true, element: <HomePage /> },
              { path: 'contacts', element: <ContactsPage /> },
              { path: 'contacts/:contactId', element: <ContactPage /> },
              { path: 'domains', element: <DomainsPage /> },
              { path: 'templates', element: <TemplatesPage /> },
              { path: 'templates/new', element: <TemplateEditorPage /> },
              { path: 'templates/:templateId', element: <TemplateEditorPage /> },
              { path: 'segments', element: <SegmentsPage /> },
              { path: 'segments/new', element: <SegmentEditorPage /> },
              { path: 'segments/:segmentId', element: <SegmentEditorPage /> },
              { path: 'campaigns', element: <CampaignsPage /> },
              { path: 'campaigns/new', element: <NewCampaignPage /> },
              { path: 'campaigns/:campaignId', element: <CampaignPage /> },
              { path: 'campaigns/:campaignId/report', element: <CampaignReportPage /> },
              { path: 'activity', element: <ActivityPage /> },
              { path: 'emails', element: <EmailsPage /> },
              { path: 'emails/:emailId', element: <EmailPage /> },
              { path: 'suppressions', element: <SuppressionsPage /> },
              { path: 'analytics', element: <AnalyticsPage /> },
              { path: 'workflows', element: <WorkflowsPage /> },
              { path: 'workflows/:workflowId', element: <WorkflowPage /> },
              { path: 'workflows/:workflowId/edit', element: <WorkflowEditorPage /> },
              { path: 'settings', element: <SettingsPage /> },
              { path: '*', element: <NotFound /> },
            ],
          },
          { path: '*', element: <NotFound /> },
        ],
      },
    ],
    { basename: '/app' },
  );
}
